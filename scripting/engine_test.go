package scripting_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/scripting"
)

// clock is a frozen clock the tests move.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func evalString(e *scripting.Engine, body string, keys, args []string) string {
	r := e.Run(context.Background(), scripting.Request{Body: []byte(body), Keys: bs(keys), Args: bs(args)}, newFake())
	return string(r.Append(nil, 2))
}

// TestKill: a script past the time limit makes the engine Busy; SCRIPT KILL stops it with
// Redis's error unless it wrote (UNKILLABLE), and NOTBUSY answers when none is past it.
// The clock starts at the Unix epoch: a script started then is Busy too.
func TestKill(t *testing.T) {
	clk := &clock{}
	e := scripting.New(scripting.Config{TimeLimit: 5 * time.Second, Now: clk.now})
	if got := e.Kill(); got != scripting.ErrNotBusy {
		t.Fatalf("Kill with nothing running = %q, want %q", got, scripting.ErrNotBusy)
	}
	body := "local x = 0\nwhile true do x = x + 1 redis.call('ping') end"
	done := make(chan scripting.Reply, 1)
	started := make(chan struct{})
	go func() {
		done <- e.Run(context.Background(), scripting.Request{Body: []byte(body)}, &startCaller{newFake(), started})
	}()
	waitBusy(t, e, clk, started)
	if got := e.Kill(); got != "" {
		t.Fatalf("Kill of a busy script that did not write = %q, want success", got)
	}
	r := <-done
	want := "-ERR Script killed by user with SCRIPT KILL... script: " + scripting.SHA1([]byte(body)) + ", on @user_script:2.\r\n"
	if got := string(r.Append(nil, 2)); got != want {
		t.Fatalf("killed script answered %q, want %q", got, want)
	}
	if e.Busy() {
		t.Fatal("Busy after the script ended")
	}

	ctx, cancel := context.WithCancel(context.Background())
	started = make(chan struct{})
	go func() {
		done <- e.Run(ctx, scripting.Request{Body: []byte("redis.call('set','k','v') while true do redis.call('ping') end")},
			&startCaller{newFake(), started})
	}()
	waitBusy(t, e, clk, started)
	if got := e.Kill(); got != scripting.ErrUnkillable {
		t.Fatalf("Kill of a script that wrote = %q, want %q", got, scripting.ErrUnkillable)
	}
	cancel() // the server's shutdown: the context ends any script
	if r := <-done; r.Kind != scripting.Error {
		t.Fatalf("cancelled script answered %q, want an error", r.Append(nil, 2))
	}
}

// startCaller closes started when the script first calls PING: the script is running, in
// its loop (where SCRIPT KILL must find it), and what it called before (a write) is recorded.
type startCaller struct {
	*fakeKeys
	started chan struct{}
}

func (c *startCaller) Call(args [][]byte, proto int) (scripting.Reply, bool) {
	r, wrote := c.fakeKeys.Call(args, proto)
	if c.started != nil && string(args[0]) == "ping" {
		close(c.started)
		c.started = nil
	}
	return r, wrote
}

// waitBusy waits for the script to call PING, checks that it is not Busy within
// the time limit, then moves the clock past the limit and checks that it is Busy.
func waitBusy(t *testing.T, e *scripting.Engine, clk *clock, started <-chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the script did not start within a minute")
	}
	if e.Busy() {
		t.Fatal("Busy before the script ran past the time limit")
	}
	clk.advance(5 * time.Second)
	if !e.Busy() {
		t.Fatal("not Busy once the script ran for the time limit")
	}
}

// TestStateReuse: a pooled interpreter carries nothing from one script to the next: not a
// write into a read-only view, not a global made by a loadstring chunk, not KEYS.
func TestStateReuse(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 1})
	steps := []struct{ body, want string }{
		{"table.insert(_G, 'leak') return 1", ":1\r\n"},
		{"return _G[1]", "-ERR user_script:1: Script attempted to access nonexistent global variable '1' script: " +
			scripting.SHA1([]byte("return _G[1]")) + ", on @user_script:1.\r\n"},
		{"pcall(loadstring('y = 1')) return 1", ":1\r\n"},
		{"return y", "-ERR user_script:1: Script attempted to access nonexistent global variable 'y' script: " +
			scripting.SHA1([]byte("return y")) + ", on @user_script:1.\r\n"},
		{"return #KEYS", ":0\r\n"},
		{"redis.setresp(3) return true", "#t\r\n"},
		{"return true", ":1\r\n"},
		{"string.rep = nil", ""},
		{"return string.rep('a', 2)", "$2\r\naa\r\n"},
	}
	for _, s := range steps {
		got := evalString(e, s.body, nil, nil)
		if s.want == "" {
			continue
		}
		if s.body == "redis.setresp(3) return true" {
			r := e.Run(context.Background(), scripting.Request{Body: []byte(s.body)}, newFake())
			got = string(r.Append(nil, 3))
		}
		if got != s.want {
			t.Errorf("%q = %q, want %q", s.body, got, s.want)
		}
	}
}

// TestCache: scripts are found by SHA1 in any case, the cache is bounded by count and by
// bytes (least recently used dropped), SCRIPT FLUSH empties it, and a script that does not
// compile is refused and not cached.
func TestCache(t *testing.T) {
	e := scripting.New(scripting.Config{MaxScripts: 2, MaxBytes: 1000})
	shas := make([]string, 3)
	for i := range shas {
		sha, msg := e.Load([]byte("return " + strings.Repeat("1", i+1)))
		if msg != "" {
			t.Fatal(msg)
		}
		shas[i] = sha
	}
	if shas[0] != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" { // redis-server: SCRIPT LOAD "return 1"
		t.Fatalf("SHA1 of 'return 1' = %s", shas[0])
	}
	if e.Exists(shas[0]) || !e.Exists(strings.ToUpper(shas[1])) || !e.Exists(shas[2]) {
		t.Fatalf("after 3 loads into 2 places: exists %v %v %v, want false true true",
			e.Exists(shas[0]), e.Exists(shas[1]), e.Exists(shas[2]))
	}
	r := e.Run(context.Background(), scripting.Request{SHA: strings.ToUpper(shas[2])}, newFake())
	if got := string(r.Append(nil, 2)); got != ":111\r\n" {
		t.Fatalf("EVALSHA in upper case = %q", got)
	}
	r = e.Run(context.Background(), scripting.Request{SHA: shas[0]}, newFake())
	if got := string(r.Append(nil, 2)); got != "-"+scripting.ErrNoScript+"\r\n" {
		t.Fatalf("EVALSHA of an evicted script = %q", got)
	}
	big := []byte("return '" + strings.Repeat("x", 600) + "'")
	e.Load(big)
	e.Load(append(big[:len(big):len(big)], ' '))
	if e.Exists(scripting.SHA1(big)) {
		t.Fatal("1200 bytes of scripts kept under MaxBytes 1000")
	}
	e.Flush()
	if e.Exists(shas[2]) {
		t.Fatal("a script survived Flush")
	}
	if sha, msg := e.Load([]byte("return (")); sha != "" || !strings.HasPrefix(msg, "ERR Error compiling script (new function): ") {
		t.Fatalf("Load of a syntax error = %q, %q", sha, msg)
	}
}

// TestConcurrentRuns: runs on many goroutines share the cache and the pool (run with -race).
func TestConcurrentRuns(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 2})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				arg := string(rune('a' + g))
				got := evalString(e, "return {KEYS[1], ARGV[1], cjson.encode({ARGV[1]})}", []string{arg}, []string{arg})
				want := "*3\r\n$1\r\n" + arg + "\r\n$1\r\n" + arg + "\r\n$5\r\n[\"" + arg + "\"]\r\n"
				if got != want {
					t.Errorf("goroutine %d run %d: %q, want %q", g, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestParseReply: every kind written in RESP3 (and RESP2's nulls) parses back to itself,
// and every strict prefix is incomplete.
func TestParseReply(t *testing.T) {
	replies := []scripting.Reply{
		scripting.StatusReply("OK"), scripting.ErrorReply("ERR x"), scripting.IntReply(-12), scripting.BulkReply([]byte("a\r\nb")),
		{}, {Kind: scripting.Double, Float: 1.5}, {Kind: scripting.Bool, Int: 1}, {Kind: scripting.Bool},
		{Kind: scripting.BigNumber, Str: []byte("123456789012345678901234567890")},
		{Kind: scripting.Verbatim, Str: []byte("txt:hello")},
		{Kind: scripting.Array, Elems: []scripting.Reply{scripting.IntReply(1), {Kind: scripting.Array, Elems: []scripting.Reply{{}}}}},
		{Kind: scripting.Map, Elems: []scripting.Reply{scripting.BulkReply([]byte("f")), scripting.IntReply(2)}},
		{Kind: scripting.Set, Elems: []scripting.Reply{scripting.BulkReply([]byte("m"))}},
	}
	for _, r := range replies {
		b := r.Append(nil, 3)
		got, n, err := scripting.ParseReply(b)
		if err != nil || n != len(b) || !bytes.Equal(got.Append(nil, 3), b) {
			t.Errorf("ParseReply(%q) = %q, %d, %v", b, got.Append(nil, 3), n, err)
		}
		for i := range len(b) {
			if _, _, err := scripting.ParseReply(b[:i]); !errors.Is(err, scripting.ErrIncomplete) {
				t.Errorf("ParseReply(%q) = %v, want ErrIncomplete", b[:i], err)
			}
		}
	}
	for _, null := range []string{"$-1\r\n", "*-1\r\n", "_\r\n"} {
		if got, _, err := scripting.ParseReply([]byte(null)); err != nil || got.Kind != scripting.Null {
			t.Errorf("ParseReply(%q) = %+v, %v; want a null", null, got, err)
		}
	}
	if got, _, err := scripting.ParseReply([]byte("|1\r\n+k\r\n+v\r\n:7\r\n")); err != nil || got.Int != 7 {
		t.Errorf("attribute then :7 = %+v, %v", got, err)
	}
}

// TestArgTablesFresh: a state reuses the last run's KEYS and ARGV tables only when the
// script left them as made; whatever a script did to them is gone in the next run.
func TestArgTablesFresh(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 1}) // one state, reused by every run
	keys, args := []string{"a"}, []string{"b", "c"}
	steps := []struct {
		body       string
		keys, args []string
		want       string
	}{
		{"KEYS.x = 1 ARGV[3] = 'z' return 1", keys, args, ":1\r\n"},
		{"return {KEYS.x == nil and 1 or 0, #ARGV, KEYS[1], ARGV[2]}", keys, args, "*4\r\n:1\r\n:2\r\n$1\r\na\r\n$1\r\nc\r\n"},
		{"setmetatable(KEYS, {__index = function() return 'm' end}) return 1", keys, args, ":1\r\n"},
		{"return KEYS[2]", keys, args, "$-1\r\n"},
		{"KEYS[1] = 'q' ARGV[2] = nil return 1", keys, args, ":1\r\n"},
		{"return {KEYS[1], ARGV[2]}", keys, args, "*2\r\n$1\r\na\r\n$1\r\nc\r\n"},
		{"return {#KEYS, #ARGV, ARGV[3]}", nil, []string{"x", "y", "z"}, "*3\r\n:0\r\n:3\r\n$1\r\nz\r\n"},
		{"return {#KEYS, #ARGV, ARGV[1]}", keys, []string{"w"}, "*3\r\n:1\r\n:1\r\n$1\r\nw\r\n"},
		{"return {KEYS[1], ARGV[1]}", []string{"k2"}, []string{"w"}, "*2\r\n$2\r\nk2\r\n$1\r\nw\r\n"},
	}
	for _, s := range steps {
		if got := evalString(e, s.body, s.keys, s.args); got != s.want {
			t.Errorf("%s: got %q, want %q", s.body, got, s.want)
		}
	}
}
