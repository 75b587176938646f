package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
)

// An origin killed with kill -9 restarts from its last snapshot; its edges keep the cost
// they replayed (or handed off) until a snapshot holds it, and re-send it to the new run:
// nothing that reached an edge is lost (issue 20: before, the 600 units replayed since the
// last save of --snapshot-interval 30s were all lost), and nothing counts twice.
func TestOriginKill9KeepsEdgeReplays(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t, "--snapshot-interval", "30s")
	// A generous --origin-timeout: a hand-off that times out under load is refused and may
	// still be counted by the origin, which would blur the exact counts this test checks.
	edges := startEdges(t, 2, []*proc{origin}, "--origin-timeout", "5s")
	ec := clients(t, edges, nil)
	keys := []string{"kill9-a", "kill9-b"}
	const perKey = 600
	for i := range perKey {
		for _, k := range keys {
			if r := limitReply(t, ec[i%2], k, 1_000_000, "1h"); r[0] != 1 {
				t.Fatalf("RL.LIMIT %s through edge %d refused with limit 1000000: %v", k, i%2, r)
			}
		}
	}
	for e, c := range ec {
		testwait.Until(t, 30*time.Second, fmt.Sprintf("edge %d to have its replays acknowledged", e), func() (bool, string) {
			info := ratchetInfo(t, c)
			return info["replay_pending"] == "0", fmt.Sprintf("replay_pending=%s", info["replay_pending"])
		})
	}
	// What the edges keep: everything, unless a snapshot (the first comes 15 s after the
	// origin started) was taken since the traffic.
	var unsaved int64
	for _, c := range ec {
		unsaved += infoInt(t, c, "replay_unsaved_cost")
	}
	oc := origin.client(t, nil)
	for _, k := range keys {
		if n := counted(t, oc, k, "1h"); n != perKey {
			t.Fatalf("before the kill the origin counts %d of %s, want %d", n, k, perKey)
		}
	}
	_ = oc.Close()

	origin.Kill()
	origin.Restart()
	oc = origin.client(t, nil)
	used := func() (bool, string) {
		var got []int64
		for _, k := range keys {
			got = append(got, counted(t, oc, k, "1h")) // current and previous cells: an hour boundary may pass
		}
		return got[0] == perKey && got[1] == perKey, fmt.Sprintf("counted %v", got)
	}
	testwait.Until(t, 60*time.Second, fmt.Sprintf("the restarted origin to count %d of each key", perKey), used)

	// Everything re-sent has arrived: the count stays exact (nothing re-sent twice).
	var resent int64
	for e, c := range ec {
		testwait.Until(t, 30*time.Second, fmt.Sprintf("edge %d to have delivered what it re-sent", e), func() (bool, string) {
			info := ratchetInfo(t, c)
			return info["replay_pending"] == "0", fmt.Sprintf("replay_pending=%s", info["replay_pending"])
		})
		resent += infoInt(t, c, "replay_resent_cost")
	}
	if ok, detail := used(); !ok {
		t.Fatalf("after the edges delivered everything: %s, want %d each", detail, perKey)
	}
	if unsaved == 2*perKey && resent != unsaved {
		t.Errorf("the edges kept %d units and re-sent %d", unsaved, resent)
	}
	t.Logf("kept %d units before the kill, re-sent %d", unsaved, resent)
}
