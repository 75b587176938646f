package commands

import (
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/server"
)

// TestInvalidateAll: a flush sends every tracking connection of the workspace Redis's null
// invalidation (RESP3: a push; RESP2: a __redis__:invalidate message to its subscribed
// redirect), forgets the workspace's keys, and leaves other workspaces alone.
func TestInvalidateAll(t *testing.T) {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Origin: eng, Host: noHost{}, Role: "origin", Version: "test"})
	open := func(id int64, ws string) *Session {
		s := d.Open(&server.Conn{ID: id}, clock.NowMs()).(*Session)
		s.Authed, s.Workspace = true, ws
		t.Cleanup(s.Close)
		return s
	}
	resp3, resp2, redirect, other := open(1, "a"), open(2, "a"), open(3, "a"), open(4, "b")
	for _, step := range []struct {
		s    *Session
		args []string
	}{
		{resp3, []string{"HELLO", "3"}}, {resp3, []string{"CLIENT", "TRACKING", "ON"}}, {resp3, []string{"GET", "k"}},
		{redirect, []string{"SUBSCRIBE", "__redis__:invalidate"}},
		{resp2, []string{"CLIENT", "TRACKING", "ON", "REDIRECT", "3"}}, {resp2, []string{"GET", "k"}},
		{other, []string{"HELLO", "3"}}, {other, []string{"CLIENT", "TRACKING", "ON"}}, {other, []string{"GET", "k"}},
	} {
		serveArgs(d, step.s, step.args...)
	}
	d.track.invalidateAll(nil, "a")
	for _, tt := range []struct {
		s    *Session
		want string
	}{
		{resp3, ">2\r\n$10\r\ninvalidate\r\n_\r\n"},
		{resp2, ""},
		{redirect, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"},
		{other, ""},
	} {
		if got := string(tt.s.TakePushed()); got != tt.want {
			t.Errorf("connection %d was pushed %q, want %q", tt.s.ID, got, tt.want)
		}
	}
	if keys, _ := d.track.counts(); keys != 1 { // workspace b's k
		t.Errorf("the table holds %d keys after the flush of a, want 1", keys)
	}
}
