package commands

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestACLTypes: the data-type commands are in Redis's categories for ACL rules, their
// keys are checked (MSET's every other argument only), and a script's redis.call of them
// is checked against the caller's rules.
func TestACLTypes(t *testing.T) {
	r := newACLRig(t, "user default on nopass ~* &* +@all\n"+
		"user lim on >pw ~rl:* +@sortedset +@hash +eval\n"+
		"user ms on >pw ~a* +mset +mget\n", "")
	lim := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	ms := NewSession(2, "127.0.0.1:5001", "127.0.0.1:6380", 0)
	const noCmd = "-ERR The user executing the script can't run this command or subcommand"
	r.steps(lim, []aclStep{
		{"AUTH lim pw", "+OK"},
		{"ZADD rl:log 1 a", ":1"},
		{"HSET rl:b tokens 3", ":1"},
		{"ZRANGE rl:log 0 -1 WITHSCORES", "*2"},
		{"ZADD other 1 a", "-NOPERM"},
		{"LPUSH rl:l x", "-NOPERM"},
		{"SADD rl:s x", "-NOPERM"},
		{"GET rl:log", "-NOPERM"},
	})
	if got := serveArgs(r.d, lim, "EVAL", "return redis.call('ZCARD', KEYS[1])", "1", "rl:log"); got != ":1\r\n" {
		t.Fatalf("a script's ZCARD = %q", got)
	}
	if got := serveArgs(r.d, lim, "EVAL", "return redis.pcall('LPUSH', KEYS[1], 'x')", "1", "rl:l"); got != noCmd+"\r\n" {
		t.Fatalf("a script's LPUSH = %q", got)
	}
	r.steps(ms, []aclStep{
		{"AUTH ms pw", "+OK"},
		{"MSET a1 bvalue a2 other", "+OK"}, // values are not keys
		{"MSET a1 v b1 v", "-NOPERM"},
		{"MGET a1 a2", "*2"},
	})
	if got := r.serve(NewSession(3, "127.0.0.1:5002", "127.0.0.1:6380", 0), "COMMAND INFO mset"); got != "*1\r\n*10\r\n$4\r\nmset\r\n:-3\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:2\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n*0\r\n*0\r\n*0\r\n" {
		t.Fatalf("COMMAND INFO mset = %q", got)
	}
}

// TestArgDocsBlocksHaveArguments: every "oneof" and "block" argument of COMMAND DOCS has
// its arguments: redis-cli 7.0 reads them for its hints and crashes on one without.
func TestArgDocsBlocksHaveArguments(t *testing.T) {
	var check func(cmd string, args []ArgDoc)
	check = func(cmd string, args []ArgDoc) {
		for _, a := range args {
			if (a.Type == "oneof" || a.Type == "block") && len(a.Args) == 0 {
				t.Errorf("%s: argument %q of type %s has no arguments", cmd, a.Name, a.Type)
			}
			check(cmd, a.Args)
		}
	}
	for _, c := range append(commandTable(), kvCommands()...) {
		check(c.Name, c.Args)
	}
}

// TestMSetWhole: past --max-memory, MSET is refused whole: none of its keys is set.
func TestMSetWhole(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 16 << 10})
	d := New(Options{Origin: eng, Host: noHost{}, Role: "origin"})
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	for i := 0; ; i++ {
		if got := serveArgs(d, s, "SET", fmt.Sprint("fill", i), "v"); got != "+OK\r\n" {
			break
		}
	}
	if got := serveArgs(d, s, "MSET", "fill0", "short", "new1", "v"); !strings.HasPrefix(got, "-OOM") {
		t.Fatalf("MSET past the bound = %q", got)
	}
	if got := serveArgs(d, s, "MGET", "fill0", "new1"); got != "*2\r\n$1\r\nv\r\n$-1\r\n" {
		t.Fatalf("after the refused MSET: %q", got)
	}
}
