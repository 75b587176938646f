package commands_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// TestInternalForward: the origin's side of forwarding. One command runs as for a client
// of the workspace and protocol given; several run as one transaction; anything but the
// regional commands, and a malformed payload, is refused.
func TestInternalForward(t *testing.T) {
	r := newClusterRig()
	if got := r.doArgs("RL.INTERNAL.FORWARD", "2", "default", "2", "GET", "k"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("forward before hello = %q", got)
	}
	if got := r.doArgs("RL.INTERNAL.HELLO", "cs", "edge1/a"); got != "+OK\r\n" {
		t.Fatalf("hello = %q", got)
	}
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"2", "default", "3", "INCRBY", "k", "5"}, bulk(":5\r\n")},
		{[]string{"2", "default", "2", "GET", "k"}, bulk("$1\r\n5\r\n")},
		{[]string{"2", "default", "2", "GET", "nokey"}, bulk("$-1\r\n")},
		{[]string{"3", "default", "2", "GET", "nokey"}, bulk("_\r\n")},
		{[]string{"2", "tenant", "2", "GET", "k"}, bulk("$-1\r\n")}, // workspaces apart
		{[]string{"2", "default", "3", "INCRBY", "k", "x"}, bulk("-ERR value is not an integer or out of range\r\n")},
		// A transaction: run whole, EXEC's reply.
		{[]string{"2", "default", "2", "INCR", "k", "2", "GET", "k", "2", "PTTL", "k"}, bulk("*3\r\n:6\r\n$1\r\n6\r\n:-1\r\n")},
		// Framed by MULTI ... EXEC: EXEC's array, even of one command, or of none.
		{[]string{"2", "default", "1", "MULTI", "2", "INCR", "k", "1", "EXEC"}, bulk("*1\r\n:7\r\n")},
		{[]string{"3", "default", "1", "multi", "2", "GET", "nokey", "1", "exec"}, bulk("*1\r\n_\r\n")},
		{[]string{"2", "default", "1", "MULTI", "1", "EXEC"}, bulk("*0\r\n")},
		{[]string{"2", "default", "1", "MULTI", "2", "INCR", "k"}, "-ERR RL.INTERNAL.FORWARD runs counter"},
		{[]string{"2", "default", "3", "RL.LIMIT", "k", "10"}, "-ERR RL.INTERNAL.FORWARD runs counter"},
		{[]string{"2", "default", "2", "CLIENT", "LIST"}, "-ERR RL.INTERNAL.FORWARD runs counter"},
		{[]string{"4", "default", "2", "GET", "k"}, "-ERR syntax error"},
		{[]string{"2", "", "2", "GET", "k"}, "-ERR syntax error"},
		{[]string{"2", "default", "3", "GET", "k"}, "-ERR syntax error"},
		{[]string{"2", "default", "0", "GET", "k"}, "-ERR syntax error"},
	}
	for _, s := range steps {
		if got := r.doArgs(append([]string{"RL.INTERNAL.FORWARD"}, s.args...)...); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%q:\n got %q\nwant prefix %q", s.args, got, s.want)
		}
	}
}

// TestEdgeForwards: an edge checks a regional command's arguments itself, forwards the
// rest with the client's workspace and protocol, writes the reply as it is, and says
// TRYAGAIN when the origin does not answer. On an event loop it waits (WouldBlock).
func TestEdgeForwards(t *testing.T) {
	var sent [][]byte
	var fail error
	s, serve := newForwardingEdge(func(_ context.Context, ws string, key []byte, proto int, payload [][]byte) ([]byte, error) {
		sent = append([][]byte{[]byte(ws), key, {byte('0' + proto)}}, payload...)
		return []byte(":42\r\n"), fail
	})
	if got := serve("INCRBY", "k", "x"); got != "-ERR value is not an integer or out of range\r\n" || sent != nil {
		t.Fatalf("argument error: %q, sent %q", got, sent)
	}
	if got := serve("INCRBY", "k", "2"); got != ":42\r\n" {
		t.Fatalf("forwarded: %q", got)
	}
	if want := "default k 2 3 INCRBY k 2"; string(joinArgs(sent)) != want {
		t.Fatalf("payload %q, want %q", joinArgs(sent), want)
	}
	s.NoWait = true
	if got := serve("GET", "k"); got != "" || !s.WouldBlock {
		t.Fatalf("on an event loop: %q, WouldBlock %v", got, s.WouldBlock)
	}
	s.NoWait, s.WouldBlock = false, false
	// A transaction of them is forwarded whole, as argc groups framed by MULTI and EXEC ...
	sent = nil
	for _, c := range []string{"MULTI", "INCR k", "PING"} {
		serve(strings.Fields(c)...)
	}
	if got := serve("EXEC"); got != ":42\r\n" || string(joinArgs(sent)) != "default k 2 1 MULTI 2 INCR k 1 PING 1 EXEC" {
		t.Fatalf("forwarded transaction: %q, payload %q", got, joinArgs(sent))
	}
	// ... unless it holds a command the origin would not run for the edge.
	sent = nil
	for _, c := range []string{"MULTI", "INCR k", "CLIENT SETNAME n"} {
		serve(strings.Fields(c)...)
	}
	if got := serve("EXEC"); !strings.HasPrefix(got, "-EXECABORT") || sent != nil {
		t.Fatalf("transaction with CLIENT SETNAME: %q, sent %q", got, sent)
	}
	fail = errors.New("timeout")
	if got := serve("GET", "k"); !strings.HasPrefix(got, "-TRYAGAIN the origin did not answer") {
		t.Fatalf("origin down: %q", got)
	}
}

func joinArgs(a [][]byte) []byte {
	var b []byte
	for i, x := range a {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, x...)
	}
	return b
}

// TestEdgeForwardsScripts: EVALSHA through an edge of a script in the edge's own cache
// (SCRIPT LOAD or EVAL through it) is forwarded as EVAL of its text, which the origin then
// caches; EVALSHA of a SHA the edge does not know is forwarded as it is (the origin may
// know it), not refused with NOSCRIPT at the edge; the same in a transaction.
func TestEdgeForwardsScripts(t *testing.T) {
	var sent [][]byte
	_, serve := newForwardingEdge(func(_ context.Context, ws string, key []byte, proto int, payload [][]byte) ([]byte, error) {
		sent = append([][]byte{[]byte(ws), key, {byte('0' + proto)}}, payload...)
		return []byte(":42\r\n"), nil
	})
	const body, other = "return(redis.call('incr',KEYS[1]))", "return(2)"
	sha := sha1Hex(body)
	if got := serve("SCRIPT", "LOAD", body); got != "$40\r\n"+sha+"\r\n" || sent != nil {
		t.Fatalf("SCRIPT LOAD = %q, sent %q", got, sent)
	}
	steps := []struct {
		args []string
		want string // the payload forwarded
	}{
		{[]string{"EVALSHA", sha, "1", "k"}, "default k 2 4 EVAL " + body + " 1 k"},
		{[]string{"evalsha_ro", strings.ToUpper(sha), "1", "k", "a"}, "default k 2 5 EVAL_RO " + body + " 1 k a"},
		{[]string{"EVALSHA", sha1Hex(other), "1", "k"}, "default k 2 4 EVALSHA " + sha1Hex(other) + " 1 k"},
		{[]string{"EVAL", other, "0"}, "default  2 3 EVAL " + other + " 0"},
		{[]string{"EVALSHA", sha1Hex(other), "0"}, "default  2 3 EVAL " + other + " 0"}, // cached by the EVAL
	}
	for _, st := range steps {
		sent = nil
		if got := serve(st.args...); got != ":42\r\n" || string(joinArgs(sent)) != st.want {
			t.Errorf("%q = %q, payload %q, want %q", st.args, got, joinArgs(sent), st.want)
		}
	}
	sent = nil
	serve("MULTI")
	serve("EVALSHA", sha, "1", "k")
	if got := serve("EXEC"); got != ":42\r\n" || string(joinArgs(sent)) != "default k 2 1 MULTI 4 EVAL "+body+" 1 k 1 EXEC" {
		t.Fatalf("forwarded transaction: %q, payload %q", got, joinArgs(sent))
	}
}

// newForwardingEdge returns an edge's session and a function serving one request on it,
// the edge forwarding with fwd.
func newForwardingEdge(fwd commands.Forward) (*commands.Session, func(args ...string) string) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
	s := commands.NewSession(1, "127.0.0.1:1", "127.0.0.1:2", 1_000_000)
	d := commands.New(commands.Options{Limiter: commands.Local(eng), Host: &fakeHost{sessions: []*commands.Session{s}}, Role: "edge",
		Version: "test", Forward: fwd})
	return s, func(args ...string) string {
		var w resp.Writer
		var a [][]byte
		for _, x := range args {
			a = append(a, []byte(x))
		}
		d.Serve(s, &w, a)
		return string(w.Bytes())
	}
}
