package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
)

// busyScenario runs, against the server at addr whose busy threshold is short, an
// endless script on one connection and what another client sees meanwhile: BUSY once the
// script is past the threshold (for a key the script does not hold, and in a
// transaction), SCRIPT KILL ending it, the killed script's error, and the server serving
// again. It returns the replies in order.
func busyScenario(t *testing.T, addr string) []string {
	t.Helper()
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.send("EVAL", "while true do end", "0")
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		b.send("GET", "busy:other")
		r := rawReply(t, b)
		if strings.HasPrefix(r, "-BUSY") {
			got = append(got, r)
			break
		}
		if r != "$-1\r\n" || time.Now().After(deadline) {
			t.Fatalf("GET while the script runs: %q (waited for BUSY 60 s)", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, args := range [][]string{{"PING"}, {"EVAL", "return 1", "0"}, {"MULTI"}, {"INCR", "busy:other"},
		{"EXEC"}, {"SCRIPT", "KILL"}} {
		b.send(args...)
		got = append(got, rawReply(t, b))
	}
	got = append(got, rawReply(t, a)) // the killed script's reply
	for _, args := range [][]string{{"SCRIPT", "KILL"}, {"PING"}, {"GET", "busy:other"}} {
		b.send(args...)
		got = append(got, rawReply(t, b))
	}
	a.send("PING")
	return append(got, rawReply(t, a))
}

// TestLuaBusyMatchesRedisServer: while a script runs past the threshold (200 ms here,
// Redis's busy-reply-threshold), other clients get redis-server's BUSY replies, SCRIPT
// KILL from another connection stops the script with redis-server's error, and both
// connections are served again; reply by reply as redis-server 7.0 answers. One event loop
// serves both connections: the script must run off it.
func TestLuaBusyMatchesRedisServer(t *testing.T) {
	t.Parallel()
	want := busyScenario(t, startRedisServer(t, "--busy-reply-threshold", "200"))
	got := busyScenario(t, start(t, "--data-dir", "", "--busy-reply-threshold", "200ms", "--event-loops", "1").Addr)
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("replies differ:\n redis-server %q\n ratchet      %q", want, got)
	}
}

// TestLuaBusyThroughEdge: a script sent to an edge runs on the origin; while it runs past
// the origin's threshold, the origin's clients get BUSY, SCRIPT KILL on the edge is
// refused (the edge runs no script, README "Scripts") and on the origin it stops the
// script, after which the edge serves again.
func TestLuaBusyThroughEdge(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t, "--busy-reply-threshold", "200ms")
	edge := startEdge(t, []*proc{origin}, "--origin-timeout", "30s")
	a, b, o := dialRaw(t, edge.Addr), dialRaw(t, edge.Addr), dialRaw(t, origin.Addr)
	a.send("EVAL", "while true do end", "0")
	waitReply(t, o, []string{"GET", "busy:edge"}, "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n")
	for _, s := range []struct {
		c    *rawConn
		args []string
		want string
	}{
		{b, []string{"SCRIPT", "KILL"}, "-ERR SCRIPT KILL on an edge: scripts run on their origin; send SCRIPT KILL to the origin that answers BUSY\r\n"},
		{o, []string{"SCRIPT", "KILL"}, "+OK\r\n"},
	} {
		s.c.send(s.args...)
		if got := rawReply(t, s.c); got != s.want {
			t.Fatalf("%q: got %q, want %q", s.args, got, s.want)
		}
	}
	// The killed script's error, or TRYAGAIN when the edge's link to the origin, stalled
	// behind the script, timed out first (README "Scripts").
	if got := rawReply(t, a); !strings.HasPrefix(got, "-") {
		t.Fatalf("the killed script through the edge: got %q, want an error", got)
	}
	waitReply(t, b, []string{"GET", "busy:edge"}, "$-1\r\n")
}

// waitReply sends args on c until the reply is want (60 s at most): other replies are
// taken as the server not there yet.
func waitReply(t *testing.T, c *rawConn, args []string, want string) {
	t.Helper()
	testwait.Until(t, 60*time.Second, fmt.Sprintf("%q to answer %q", args, want), func() (bool, string) {
		c.send(args...)
		got := rawReply(t, c)
		return got == want, fmt.Sprintf("got %q", got)
	})
}
