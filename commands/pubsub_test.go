package commands_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

// conns is a Dispatcher with connections opened as the server opens them (so that they
// can be pushed to and named by ID), each in its workspace.
type conns struct {
	d  *commands.Dispatcher
	ss []*commands.Session
}

func newConns(t *testing.T, maxKeys int, workspaces ...string) *conns {
	t.Helper()
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 20})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", Version: "test",
		TrackingMaxKeys: maxKeys})
	c := &conns{d: d}
	for i, ws := range workspaces {
		s := d.Open(&server.Conn{ID: int64(i + 1)}, clock.NowMs()).(*commands.Session)
		s.Authed, s.Workspace = true, ws
		c.ss = append(c.ss, s)
		t.Cleanup(s.Close)
	}
	return c
}

// do serves cmd on connection i and returns its reply.
func (c *conns) do(i int, cmd string) string {
	var w resp.Writer
	w.SetProto(c.ss[i].Proto())
	c.d.Serve(c.ss[i], &w, split(cmd))
	return string(w.Bytes())
}

// pushStep is a command of one connection, its reply ("": not checked), and what each
// connection was pushed since the step before.
type pushStep struct {
	conn       int
	cmd, reply string
	pushed     [3]string
}

// check runs step i.
func (c *conns) check(t *testing.T, i int, step pushStep) {
	t.Helper()
	got := c.do(step.conn, step.cmd)
	if step.reply != "" && got != step.reply {
		t.Errorf("step %d: conn %d %s = %q, want %q", i, step.conn, step.cmd, got, step.reply)
	}
	for j, s := range c.ss {
		if p := string(s.TakePushed()); p != step.pushed[j] {
			t.Errorf("step %d: conn %d %s: conn %d was pushed %q, want %q", i, step.conn, step.cmd, j, p, step.pushed[j])
		}
	}
}

// TestPushesStayInTheirWorkspace: messages and invalidations reach the connections of the
// publishing or writing connection's workspace only; the others get nothing.
func TestPushesStayInTheirWorkspace(t *testing.T) {
	c := newConns(t, 0, "a", "a", "b")
	for i, step := range []pushStep{
		{conn: 0, cmd: "SUBSCRIBE ch", reply: "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"},
		{conn: 2, cmd: "PUBLISH ch m", reply: ":0\r\n"},
		{conn: 1, cmd: "PUBLISH ch m", reply: ":1\r\n", pushed: [3]string{"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"}},
		{conn: 2, cmd: "PUBSUB NUMSUB ch", reply: "*2\r\n$2\r\nch\r\n:0\r\n"},
		{conn: 1, cmd: "PUBSUB CHANNELS", reply: "*1\r\n$2\r\nch\r\n"},
		{conn: 1, cmd: "HELLO 3", reply: ""},
		{conn: 1, cmd: "CLIENT TRACKING ON", reply: "+OK\r\n"},
		{conn: 1, cmd: "GET k", reply: "_\r\n"},
		{conn: 2, cmd: "SET k 1", reply: "+OK\r\n"},
		{conn: 0, cmd: "UNSUBSCRIBE", reply: "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n"},
		{conn: 0, cmd: "SET k 1", reply: "+OK\r\n", pushed: [3]string{1: ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"}},
		{conn: 0, cmd: "SET k 2", reply: "+OK\r\n"},
	} {
		c.check(t, i, step)
	}
}

// TestTrackingRedirect: invalidations go to the REDIRECT connection (a RESP2 one only
// while it is subscribed, as __redis__:invalidate messages); once it has gone, a RESP3
// tracking connection is told tracking-redir-broken and TRACKINGINFO says so.
func TestTrackingRedirect(t *testing.T) {
	c := newConns(t, 0, "a", "a", "a")
	for i, step := range []pushStep{
		{conn: 0, cmd: "CLIENT TRACKING ON REDIRECT 3", reply: "+OK\r\n"},
		{conn: 0, cmd: "GET k", reply: "$-1\r\n"},
		{conn: 1, cmd: "SET k 1", reply: "+OK\r\n"}, // not subscribed: nothing
		{conn: 0, cmd: "GET k", reply: "$1\r\n1\r\n"},
		{conn: 2, cmd: "SUBSCRIBE x", reply: "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"},
		{conn: 1, cmd: "SET k 2", reply: "+OK\r\n",
			pushed: [3]string{2: "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"}},
		{conn: 0, cmd: "HELLO 3"},
		{conn: 0, cmd: "GET k", reply: "$1\r\n2\r\n"},
	} {
		c.check(t, i, step)
	}
	c.ss[2].Close()
	if got := c.do(1, "SET k 3"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	if p := string(c.ss[0].TakePushed()); p != ">2\r\n$21\r\ntracking-redir-broken\r\n:3\r\n" {
		t.Errorf("after its redirect closed, the tracking connection was pushed %q", p)
	}
	if got := c.do(0, "CLIENT TRACKINGINFO"); got != "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:3\r\n$8\r\nprefixes\r\n*0\r\n" {
		t.Errorf("TRACKINGINFO = %q", got)
	}
}

// TestTrackingBounds: with a table of one key, remembering a second evicts the first and
// invalidates it at once; a BCAST connection's pending expiries are bounded alike (the
// one dropped is broadcast at once).
func TestTrackingBounds(t *testing.T) {
	c := newConns(t, 1, "a", "a", "a")
	inv := func(keys ...string) string {
		b := ">2\r\n$10\r\ninvalidate\r\n*" + fmt.Sprint(len(keys)) + "\r\n"
		for _, k := range keys {
			b += "$" + fmt.Sprint(len(k)) + "\r\n" + k + "\r\n"
		}
		return b
	}
	for i, step := range []pushStep{
		{conn: 0, cmd: "HELLO 3"},
		{conn: 0, cmd: "CLIENT TRACKING ON", reply: "+OK\r\n"},
		{conn: 0, cmd: "GET k1", reply: "_\r\n"},
		{conn: 0, cmd: "GET k2", reply: "_\r\n" + inv("k1")},
		{conn: 1, cmd: "SET k1 x", reply: "+OK\r\n"},
		{conn: 1, cmd: "SET k2 x", reply: "+OK\r\n", pushed: [3]string{inv("k2")}},
		{conn: 2, cmd: "HELLO 3"},
		{conn: 2, cmd: "CLIENT TRACKING ON BCAST PREFIX b", reply: "+OK\r\n"},
		{conn: 1, cmd: "SET b1 x PX 100000", reply: "+OK\r\n", pushed: [3]string{2: inv("b1")}},
		{conn: 1, cmd: "SET b2 x PX 100000", reply: "+OK\r\n", pushed: [3]string{2: inv("b1") + inv("b2")}},
	} {
		c.check(t, i, step)
	}
}

// TestPubSubClientListAndInfo: CLIENT LIST shows a subscriber's counts and flags (P, t, B
// as Redis), INFO stats the workspace-wide channels and patterns and the tracking table.
func TestPubSubClientListAndInfo(t *testing.T) {
	c := newConns(t, 0, "a", "a", "a")
	c.do(0, "SUBSCRIBE x y")
	c.do(0, "PSUBSCRIBE z*")
	c.do(1, "CLIENT TRACKING ON BCAST PREFIX p")
	c.do(2, "CLIENT TRACKING ON")
	c.do(2, "GET k")
	for i, want := range []string{" flags=P db=0 sub=2 psub=1 ", " flags=tB db=0 sub=0 psub=0 ", " flags=t db=0 sub=0 "} {
		if line := c.ss[i].ClientLine(0); !strings.Contains(line, want) {
			t.Errorf("CLIENT LIST line %q lacks %q", line, want)
		}
	}
	info := c.do(2, "INFO")
	for _, want := range []string{"tracking_clients:2\r\n", "pubsub_channels:2\r\n", "pubsub_patterns:1\r\n",
		"tracking_total_keys:1\r\n", "tracking_total_prefixes:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
}
