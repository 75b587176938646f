package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// regional returns current_regional + previous_regional of a tuple: its whole count, even
// if its window rolled over between two reads.
func regional(t testing.TB, c *redis.Client, args ...any) (sum, seq int64) {
	t.Helper()
	st, _ := status(t, c, args...)
	return statusInt(t, st, "current_regional") + statusInt(t, st, "previous_regional"), statusInt(t, st, "sequence")
}

// Test 10: counts survive restarts; cells of passed windows do not come back.
func TestRestartKeepsCounts(t *testing.T) {
	t.Parallel()

	t.Run("SIGTERM writes a final snapshot", func(t *testing.T) {
		t.Parallel()
		// No periodic snapshot in this test's lifetime: only the final one can keep counts.
		p := start(t, "--snapshot-interval", "1h")
		c := p.client(t, nil)
		for range 7 {
			limitReply(t, c, "term", 100, "31d")
		}
		for range 2 {
			limitReply(t, c, "term", 100, "31d", "NS", "other")
		}
		for range 3 {
			limitReply(t, c, "term", 100, "1d")
		}
		before, _ := status(t, c, "term", "31d")
		_ = c.Close()

		if code := p.Stop(); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.logTail())
		}
		p.Restart()
		c = p.client(t, nil)
		after, _ := status(t, c, "term", "31d")
		if statusInt(t, after, "sequence") == statusInt(t, before, "sequence") {
			if u := statusInt(t, after, "used"); u != statusInt(t, before, "used") || u != 7 {
				t.Errorf("used after restart = %d, before = %d, want 7", u, statusInt(t, before, "used"))
			}
		}
		if n, _ := regional(t, c, "term", "31d"); n != 7 {
			t.Errorf("regional count after restart = %d, want 7", n)
		}
		if n, _ := regional(t, c, "term", "31d", "NS", "other"); n != 2 {
			t.Errorf("namespace other after restart = %d, want 2", n)
		}
		if n, _ := regional(t, c, "term", "1d"); n != 3 {
			t.Errorf("1d window after restart = %d, want 3", n)
		}
		if r := limitReply(t, c, "term", 100, "31d"); r[0] != 1 || r[2] != 92 {
			t.Errorf("RL.LIMIT after restart = %v, want remaining 92", r)
		}
	})

	t.Run("kill -9 keeps the last periodic snapshot", func(t *testing.T) {
		t.Parallel()
		p := start(t, "--snapshot-interval", "100ms")
		c := p.client(t, nil)
		for range 5 {
			limitReply(t, c, "crash", 100, "31d")
		}
		lastCount := time.Now().UnixMilli()
		// Wait for a snapshot that began after the last count was acknowledged.
		deadline := time.Now().Add(15 * time.Second)
		for i := 0; ; i++ {
			done := infoInt(t, c, "snapshot_last_success_ms")
			took := infoInt(t, c, "snapshot_last_duration_ms")
			if done-took-1 > lastCount {
				break
			}
			if i >= 1000 || time.Now().After(deadline) {
				t.Fatalf("no snapshot after the last count within 15s (last success %d ms, count at %d ms)", done, lastCount)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
		p.Kill()
		p.Restart()
		c = p.client(t, nil)
		if n, _ := regional(t, c, "crash", "31d"); n != 5 {
			t.Errorf("regional count after kill -9 and restart = %d, want 5", n)
		}
	})

	t.Run("cells of passed windows are dropped", func(t *testing.T) {
		t.Parallel()
		p := start(t, "--snapshot-interval", "100ms")
		c := p.client(t, nil)
		ctx := context.Background()
		limitReply(t, c, "short", 10, "1s")
		limitReply(t, c, "short", 10, "1s")
		limitReply(t, c, "long", 10, "10m")
		_, seq := regional(t, c, "short", "1s")
		if n := c.DBSize(ctx).Val(); n < 2 {
			t.Fatalf("DBSIZE before restart = %d, want at least 2", n)
		}
		_ = c.Close()
		if code := p.Stop(); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d", code)
		}
		// The 1s cell stops mattering when sequence seq+2 begins.
		wait := time.Until(time.UnixMilli((seq+2)*1000 + 50))
		if wait > 3*time.Second {
			t.Fatalf("unexpected wait %v", wait)
		}
		time.Sleep(wait)
		p.Restart()
		c = p.client(t, nil)
		if n := c.DBSize(ctx).Val(); n != 1 {
			t.Errorf("DBSIZE after restart = %d, want 1 (only the 10m cell is live)", n)
		}
		st, _ := status(t, c, "short", "1s")
		for _, f := range []string{"current_regional", "previous_regional", "used"} {
			if v := statusInt(t, st, f); v != 0 {
				t.Errorf("short window after restart: %s = %d, want 0", f, v)
			}
		}
		if n, _ := regional(t, c, "long", "10m"); n != 1 {
			t.Errorf("10m window after restart = %d, want 1", n)
		}
		if r := limitReply(t, c, "short", 10, "1s"); r[0] != 1 || r[2] != 9 {
			t.Errorf("RL.LIMIT short after restart = %v, want remaining 9", r)
		}
	})
}
