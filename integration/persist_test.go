package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// regional returns current_regional + previous_regional of a tuple: its whole count, even
// if its window rolled over between two reads.
func regional(t testing.TB, c *redis.Client, args ...any) (sum, seq int64) {
	t.Helper()
	st, _ := status(t, c, args...)
	return statusInt(t, st, "current_regional") + statusInt(t, st, "previous_regional"), statusInt(t, st, "sequence")
}

// waitSnapshotAfter waits (up to 15 s) for a periodic snapshot that began after ms (unix
// ms), when the last write was acknowledged. A snapshot skipped because nothing changed
// counts too: what is on disk is then current.
func waitSnapshotAfter(t testing.TB, c *redis.Client, ms int64) {
	t.Helper()
	testwait.Until(t, 15*time.Second, "a snapshot after the last write", func() (bool, string) {
		done := infoInt(t, c, "snapshot_last_success_ms")
		took := infoInt(t, c, "snapshot_last_duration_ms")
		return done-took-1 > ms, fmt.Sprintf("last success %d ms, write at %d ms", done, ms)
	})
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
		waitSnapshotAfter(t, c, time.Now().UnixMilli())
		_ = c.Close()
		p.Kill()
		p.Restart()
		c = p.client(t, nil)
		if n, _ := regional(t, c, "crash", "31d"); n != 5 {
			t.Errorf("regional count after kill -9 and restart = %d, want 5", n)
		}
	})

	t.Run("kill -9 after incremental saves keeps every saved count", func(t *testing.T) {
		t.Parallel()
		p := start(t, "--snapshot-interval", "100ms")
		c := p.client(t, nil)
		counted := map[string]int64{}
		countAndSave := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				limitReply(t, c, k, 100, "31d")
				counted[k]++
			}
			waitSnapshotAfter(t, c, time.Now().UnixMilli())
		}
		check := func(when string) {
			t.Helper()
			for k, n := range counted {
				if got, _ := regional(t, c, k, "31d"); got != n {
					t.Errorf("%s: %s = %d, want %d", when, k, got, n)
				}
			}
		}
		countAndSave("inc-a", "inc-a", "inc-a") // the base (or frames over it)
		countAndSave("inc-b", "inc-a")          // a frame of the changed tuples
		logs, _ := filepath.Glob(filepath.Join(p.DataDir, "snapshot.db.log.*"))
		if len(logs) == 0 {
			t.Fatalf("no delta log in %s after the second save", p.DataDir)
		}
		_ = c.Close()
		p.Kill()
		p.Restart()
		c = p.client(t, nil)
		check("after the first kill -9")
		// The restarted origin appends to a log of its own over the same base.
		countAndSave("inc-c", "inc-c", "inc-a")
		_ = c.Close()
		p.Kill()
		p.Restart()
		c = p.client(t, nil)
		check("after the second kill -9")
		if logs2, _ := filepath.Glob(filepath.Join(p.DataDir, "snapshot.db.log.*")); len(logs2) < 2 {
			t.Errorf("logs %v after a restart's saves, want a second one", logs2)
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

// Test 10 for the counter keyspace: keys of SET, INCRBY and CL.THROTTLE survive a SIGTERM
// restart and a kill -9 after a periodic snapshot, with their values and TTLs (their
// expiry instants: a PTTL after the restart is no higher than before); keys expired by
// the restart are not back.
func TestRestartKeepsCounterKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// write fills the keyspace and returns each key's PTTL and the throttle's peek.
	write := func(t *testing.T, c *redis.Client) (map[string]int64, []any) {
		t.Helper()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(c.Set(ctx, "plain", "value", 0).Err())
		must(c.Set(ctx, "ttl", "with ttl", 10*time.Minute).Err())
		must(c.IncrBy(ctx, "counter", 40).Err())
		must(c.IncrBy(ctx, "counter", 2).Err())
		must(c.IncrBy(ctx, "expiring", 7).Err())
		must(c.Expire(ctx, "expiring", 20*time.Minute).Err())
		// 1 per hour: the state cannot drift during the test.
		must(c.Do(ctx, "CL.THROTTLE", "cell", 5, 1, 3600, 3).Err())
		pttl := map[string]int64{}
		for _, k := range []string{"plain", "ttl", "counter", "expiring", "cell"} {
			d, err := c.Do(ctx, "PTTL", k).Int64()
			must(err)
			pttl[k] = d
		}
		peek, err := c.Do(ctx, "CL.THROTTLE", "cell", 5, 1, 3600, 0).Slice()
		must(err)
		return pttl, peek
	}
	check := func(t *testing.T, c *redis.Client, before map[string]int64, peek []any) {
		t.Helper()
		for k, want := range map[string]string{"plain": "value", "ttl": "with ttl", "counter": "42", "expiring": "7"} {
			if got, err := c.Get(ctx, k).Result(); err != nil || got != want {
				t.Errorf("GET %s after restart = %q, %v; want %q", k, got, err, want)
			}
		}
		for k, was := range before {
			got, err := c.Do(ctx, "PTTL", k).Int64()
			switch {
			case err != nil:
				t.Errorf("PTTL %s: %v", k, err)
			case was == -1 && got != -1:
				t.Errorf("PTTL %s after restart = %d, want -1 (no expiry)", k, got)
			case was > 0 && (got <= 0 || got > was):
				t.Errorf("PTTL %s after restart = %d, want in (0, %d]", k, got, was)
			}
		}
		if before["plain"] != -1 || before["counter"] != -1 || before["ttl"] <= 0 || before["cell"] <= 0 {
			t.Errorf("PTTLs before the restart: %v", before)
		}
		got, err := c.Do(ctx, "CL.THROTTLE", "cell", 5, 1, 3600, 0).Slice()
		if err != nil || len(got) != 5 || len(peek) != 5 || !reflect.DeepEqual(got[:3], peek[:3]) {
			t.Errorf("CL.THROTTLE peek after restart = %v, %v; before %v", got, err, peek)
		}
		// "cell" used 3 of its burst: 3 fewer remaining than a key with no state.
		fresh, err := c.Do(ctx, "CL.THROTTLE", "fresh", 5, 1, 3600, 0).Slice()
		if err != nil || len(got) != 5 || len(fresh) != 5 || got[2] != fresh[2].(int64)-3 {
			t.Errorf("CL.THROTTLE remaining after restart = %v, a fresh key's %v (%v); want 3 fewer", got, fresh, err)
		}
	}

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		p := start(t, "--snapshot-interval", "1h")
		c := p.client(t, nil)
		before, peek := write(t, c)
		if err := c.Set(ctx, "short", "gone after the restart", 1500*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		expiry := time.Now().Add(1500 * time.Millisecond)
		_ = c.Close()
		if code := p.Stop(); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.logTail())
		}
		time.Sleep(time.Until(expiry.Add(100 * time.Millisecond)))
		p.Restart()
		c = p.client(t, nil)
		check(t, c, before, peek)
		if n, err := c.Exists(ctx, "short").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS short after its TTL passed = %d, %v; want 0", n, err)
		}
		// Five keys restored: "short" was not written (expired at the save) or was
		// dropped at load.
		if log := p.Log(); !strings.Contains(log, "counter_keys=5 ") && !strings.Contains(log, `"counter_keys":5,`) {
			t.Errorf("log does not report 5 counter keys loaded:\n%s", p.logTail())
		}
	})

	t.Run("kill -9 after a periodic snapshot", func(t *testing.T) {
		t.Parallel()
		p := start(t, "--snapshot-interval", "100ms")
		c := p.client(t, nil)
		before, peek := write(t, c)
		waitSnapshotAfter(t, c, time.Now().UnixMilli())
		_ = c.Close()
		p.Kill()
		p.Restart()
		c = p.client(t, nil)
		check(t, c, before, peek)
	})
}
