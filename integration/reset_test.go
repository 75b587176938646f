package integration

// RL.RESET with real processes (issue 22): through edges, which hand it to the origin and
// learn it from its change feed, and between regions.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// reset runs RL.RESET through c and returns its reply.
func reset(t testing.TB, c *redis.Client, args ...any) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), append([]any{"RL.RESET"}, args...)...).Int64()
	if err != nil {
		t.Fatalf("RL.RESET %v: %v", args, err)
	}
	return n
}

// TestResetThroughEdgeSeenByAnother: a reset through one edge reaches another edge through
// the origin's change feed: the other edge's local view, fresh for a minute
// (--freshness 60s), is dropped, and its next local decision reads the zeroed count.
// Without the feed it would keep answering from its view until the freshness ran out.
func TestResetThroughEdgeSeenByAnother(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t, "--data-dir", "")
	edges := startEdges(t, 2, []*proc{origin}, append([]string{"--freshness", "60s"}, countsNotTimeouts...)...)
	o, a, b := origin.client(t, nil), edges[0].client(t, nil), edges[1].client(t, nil)
	w, _ := liveWindow(t, 30*time.Second, "10m", "11m", "13m")

	for range 6 {
		allow(t, b, true, "login:alice", 100, w, "COST", 10)
	}
	waitCounts(t, 5*time.Second, "the origin to hold b's 60", o, "login:alice", w, func(c counts) bool { return c.regional == 60 })
	// b decides from its own view: a peek (COST 0) of a fresh tuple reads nothing.
	if r := limitReply(t, b, "login:alice", 100, w, "COST", 0); r[2] != 40 {
		t.Fatalf("b's peek before the reset: %v, want remaining 40", r)
	}
	if n := reset(t, a, "login:alice", w); n != 1 {
		t.Fatalf("RL.RESET through a = %d, want 1", n)
	}
	if c := statusCounts(t, o, "login:alice", w); c.used != 0 {
		t.Fatalf("origin after the reset: %v", c)
	}
	// a sees its own reset at once.
	if r := limitReply(t, a, "login:alice", 100, w, "COST", 0); r[2] != 100 {
		t.Fatalf("a's peek after its reset: %v, want remaining 100", r)
	}
	began := time.Now()
	testwait.Until(t, 5*time.Second, "b to see the reset", func() (bool, string) {
		r := limitReply(t, b, "login:alice", 100, w, "COST", 0)
		return r[2] == 100, fmt.Sprintf("remaining %d", r[2])
	})
	t.Logf("b saw the reset %v after it was answered", time.Since(began))
	if n := infoInt(t, b, "changes_applied"); n < 1 {
		t.Errorf("b's INFO changes_applied = %d, want at least the reset", n)
	}
	// b counts from zero (a's peek took a lease of 16, which the origin holds back);
	// nothing of the 60 comes back.
	allow(t, b, true, "login:alice", 100, w, "COST", 80)
	allow(t, b, false, "login:alice", 100, w, "COST", 21)
	waitCounts(t, 5*time.Second, "the origin to hold b's 80 since", o, "login:alice", w, func(c counts) bool { return c.regional == 80 })
	time.Sleep(200 * time.Millisecond) // replays still on their way would show now
	if c := statusCounts(t, o, "login:alice", w); c.regional != 80 {
		t.Fatalf("origin at the end: %v, want 80", c)
	}
	if n := reset(t, b, "nobody", w, "1h", "NS", "other"); n != 0 {
		t.Fatalf("RL.RESET of tuples without usage = %d", n)
	}
}

// TestResetReachesOtherRegion: a reset in region a reaches region b with the next
// publication; b's usage that a had not seen is kept, and nothing a published before the
// reset comes back.
func TestResetReachesOtherRegion(t *testing.T) {
	t.Parallel()
	ps := startRegions(t, []string{"a", "b"}, "--data-dir", "", "--publish-threshold", "0")
	a, b := ps["a"].client(t, nil), ps["b"].client(t, nil)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	allow(t, a, true, "k", 100, w, "COST", 60)
	allow(t, b, true, "k", 100, w, "COST", 30)
	waitCounts(t, regionPoll, "b to import a's 60", b, "k", w, func(c counts) bool { return c.used == 90 })
	waitCounts(t, regionPoll, "a to import b's 30", a, "k", w, func(c counts) bool { return c.used == 90 })

	if n := reset(t, a, "k", w); n != 1 {
		t.Fatalf("RL.RESET in a = %d, want 1", n)
	}
	if c := statusCounts(t, a, "k", w); c.used != 0 {
		t.Fatalf("a after its reset: %v", c)
	}
	waitCounts(t, regionPoll, "b to take a's reset", b, "k", w, func(c counts) bool { return c.used == 0 })
	allow(t, b, true, "k", 100, w, "COST", 5)
	waitCounts(t, regionPoll, "a to import b's 5 since", a, "k", w, func(c counts) bool { return c.used == 5 })
	time.Sleep(time.Second) // a few publications and heartbeats: nothing from before comes back
	for name, c := range map[string]*redis.Client{"a": a, "b": b} {
		if got := statusCounts(t, c, "k", w); got.used != 5 {
			t.Errorf("%s at the end: %v, want used 5", name, got)
		}
	}
}

// TestResetSurvivesRestart: a reset is in the origin's snapshot (its reset record beside
// the raw cells): after a restart, whose cells load part by part in the background, the
// reset tuple still counts from zero and the other keeps its usage.
func TestResetSurvivesRestart(t *testing.T) {
	t.Parallel()
	p := start(t, "--snapshot-interval", "1h") // only the final snapshot
	c := p.client(t, nil)
	w, _ := liveWindow(t, time.Minute, "10m", "11m", "13m")
	for _, key := range []string{"login:alice", "login:bob"} {
		allow(t, c, true, key, 10, w, "COST", 9)
	}
	if n := reset(t, c, "login:alice", w); n != 1 {
		t.Fatalf("RL.RESET = %d, want 1", n)
	}
	_ = c.Close()
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	p.Restart()
	c = p.client(t, nil)
	for key, want := range map[string]int64{"login:alice": 10, "login:bob": 1} {
		if r := limitReply(t, c, key, 10, w, "COST", 0); r[2] != want {
			t.Errorf("after the restart, %s: %v, want remaining %d", key, r, want)
		}
	}
}
