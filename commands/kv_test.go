package commands_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

type step struct{ cmd, want string }

func (r *rig) run(t *testing.T, steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := r.do(s.cmd); got != s.want {
			t.Errorf("%s:\n got %q\nwant %q", s.cmd, got, s.want)
		}
	}
}

// TestKVCommandsAsRedis: every reply here was recorded from redis-server 7.0.15 with the
// same commands in the same order (the TTLs at the same instant).
func TestKVCommandsAsRedis(t *testing.T) {
	r := newRig("")
	r.run(t, []step{
		{"GET k", "$-1\r\n"},
		{"SET k v", "+OK\r\n"},
		{"GET k", "$1\r\nv\r\n"},
		{"SET k v2 NX", "$-1\r\n"},
		{"SET k v3 XX GET", "$1\r\nv\r\n"},
		{"SET n1 v NX XX", "-ERR syntax error\r\n"},
		{"SET k v EX 0", "-ERR invalid expire time in 'set' command\r\n"},
		{"SET k v EX -1", "-ERR invalid expire time in 'set' command\r\n"},
		{"SET k v EX abc", "-ERR value is not an integer or out of range\r\n"},
		{"SET k v EX 10 PX 100", "-ERR syntax error\r\n"},
		{"SET k v KEEPTTL EX 10", "-ERR syntax error\r\n"},
		{"SET k v EX 10 KEEPTTL", "-ERR syntax error\r\n"},
		{"SET k v EX", "-ERR syntax error\r\n"},
		{"SET k v FOO", "-ERR syntax error\r\n"},
		{"SET k v EX 9223372036854775807", "-ERR invalid expire time in 'set' command\r\n"},
		{"SET k v PX 9223372036854775807", "-ERR invalid expire time in 'set' command\r\n"},
		{"SET k v EX 10 EX 20", "+OK\r\n"},
		{"SET k v NX NX", "$-1\r\n"},
		{"SET k v GET GET", "$1\r\nv\r\n"},
		{"SET nokey v GET", "$-1\r\n"},
		{"SET k v EX 1.5", "-ERR value is not an integer or out of range\r\n"},
		{"SET k v EX +5", "-ERR value is not an integer or out of range\r\n"},
		{"SETEX k 0 v", "-ERR invalid expire time in 'setex' command\r\n"},
		{"SETEX k abc v", "-ERR value is not an integer or out of range\r\n"},
		{"SETEX k 10 v", "+OK\r\n"},
		{"PSETEX k -5 v", "-ERR invalid expire time in 'psetex' command\r\n"},
		{"INCR k", "-ERR value is not an integer or out of range\r\n"},
		{"INCR c", ":1\r\n"},
		{"INCRBY c 5", ":6\r\n"},
		{"INCRBY c abc", "-ERR value is not an integer or out of range\r\n"},
		{"INCRBY c +5", "-ERR value is not an integer or out of range\r\n"},
		{"DECRBY c -9223372036854775808", "-ERR decrement would overflow\r\n"},
		{"DECR c", ":5\r\n"},
		{"DECRBY c 10", ":-5\r\n"},
		{"SET big 9223372036854775807", "+OK\r\n"},
		{"INCR big", "-ERR increment or decrement would overflow\r\n"},
		{"SET neg -9223372036854775808", "+OK\r\n"},
		{"DECR neg", "-ERR increment or decrement would overflow\r\n"},
		{"SET lz 01", "+OK\r\n"},
		{"INCR lz", "-ERR value is not an integer or out of range\r\n"},
		{"EXPIRE c 100 NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
		{"EXPIRE c 100 GT LT", "-ERR GT and LT options at the same time are not compatible\r\n"},
		{"EXPIRE c 100 FOO", "-ERR Unsupported option FOO\r\n"},
		{"EXPIRE c abc", "-ERR value is not an integer or out of range\r\n"},
		{"EXPIRE c 100 FOO bar", "-ERR Unsupported option FOO\r\n"},
		{"EXPIRE nokey 100", ":1\r\n"},
		{"EXPIRE c 100 XX", ":0\r\n"},
		{"EXPIRE c 100 NX", ":1\r\n"},
		{"EXPIRE c 100 NX", ":0\r\n"},
		{"EXPIRE c 50 GT", ":0\r\n"},
		{"EXPIRE c 200 GT", ":1\r\n"},
		{"EXPIRE c 300 LT", ":0\r\n"},
		{"EXPIRE c 150 LT", ":1\r\n"},
		{"TTL c", ":150\r\n"},
		{"TTL nokey", ":100\r\n"},
		{"TTL k", ":10\r\n"},
		{"PERSIST c", ":1\r\n"},
		{"PERSIST c", ":0\r\n"},
		{"TTL c", ":-1\r\n"},
		{"EXPIRE c 9223372036854775807", "-ERR invalid expire time in 'expire' command\r\n"},
		{"EXPIRE c 9223372036854775", "-ERR invalid expire time in 'expire' command\r\n"},
		{"PEXPIRE c 9223372036854775807", "-ERR invalid expire time in 'pexpire' command\r\n"},
		{"EXPIRE c -1", ":1\r\n"},
		{"EXISTS c", ":0\r\n"},
		{"EXISTS k k nokey", ":3\r\n"},
		{"DEL k k nokey", ":2\r\n"},
		{"DEL k", ":0\r\n"},
		{"TYPE big", "+string\r\n"},
		{"TYPE nokey", "+none\r\n"},
		{"SCAN abc", "-ERR invalid cursor\r\n"},
		{"SCAN 0 COUNT 0", "-ERR syntax error\r\n"},
		{"SCAN 0 COUNT abc", "-ERR value is not an integer or out of range\r\n"},
		{"SCAN 0 FOO", "-ERR syntax error\r\n"},
		{"SCAN 0 MATCH", "-ERR syntax error\r\n"},
		{"SCAN -1 COUNT 1000", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"SCAN 0 COUNT 1000 MATCH b*", "*2\r\n$1\r\n0\r\n*1\r\n$3\r\nbig\r\n"},
		{"SCAN 0 COUNT 1000 TYPE hash", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"SCAN 0 COUNT 1000 TYPE string MATCH nomatch", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"GET", "-ERR wrong number of arguments for 'get' command\r\n"},
		{"SET k", "-ERR wrong number of arguments for 'set' command\r\n"},
	})
}

// TestKVTimes drives TTLs with the rig's clock: PTTL, TTL's rounding, expiry at the
// millisecond after the expiry, EXAT/PXAT, KEEPTTL, and INCR keeping a TTL.
func TestKVTimes(t *testing.T) {
	r := newRig("")
	now := r.clock.NowMs()
	r.run(t, []step{
		{"SET k v PX 1500", "+OK\r\n"},
		{"PTTL k", ":1500\r\n"},
		{"TTL k", ":2\r\n"}, // 1.5 s rounds to 2
		{"SET k v2 KEEPTTL", "+OK\r\n"},
		{"PTTL k", ":1500\r\n"},
		{"INCR n", ":1\r\n"},
		{"PEXPIRE n 100", ":1\r\n"},
		{"INCRBY n 41", ":42\r\n"},
		{"PTTL n", ":100\r\n"},
		{fmt.Sprint("SET a 1 PXAT ", now+2000), "+OK\r\n"},
		{fmt.Sprint("SET b 1 EXAT ", now/1000+3), "+OK\r\n"},
		{fmt.Sprint("SET gone 1 PXAT ", now-1), "+OK\r\n"},
		{"EXISTS gone", ":0\r\n"},
		{fmt.Sprint("PEXPIREAT a ", now+500), ":1\r\n"},
		{"PTTL a", ":500\r\n"},
		{"PTTL b", ":3000\r\n"},
	})
	r.clock.Advance(1499)
	r.run(t, []step{{"PTTL k", ":1\r\n"}, {"TTL k", ":0\r\n"}})
	r.clock.Advance(1)
	r.run(t, []step{{"PTTL k", ":0\r\n"}, {"GET k", "$2\r\nv2\r\n"}})
	r.clock.Advance(1)
	r.run(t, []step{{"PTTL k", ":-2\r\n"}, {"GET k", "$-1\r\n"}, {"GET n", "$-1\r\n"}, {"GET a", "$-1\r\n"}, {"EXISTS b", ":1\r\n"}})
	r.run(t, []step{{fmt.Sprint("EXPIREAT b ", 0), ":1\r\n"}, {"EXISTS b", ":0\r\n"}})
}

// TestKVMulti: counter commands queue inside MULTI and run in EXEC at one instant, next to
// RL commands; a syntax error is that command's reply, as in Redis.
func TestKVMulti(t *testing.T) {
	r := newRig("")
	r.run(t, []step{
		// rate-limiter-flexible's get() and set().
		{"MULTI", "+OK\r\n"},
		{"SET rlflx:k 3 EX 60", "+QUEUED\r\n"},
		{"PTTL rlflx:k", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n+OK\r\n:60000\r\n"},
		{"MULTI", "+OK\r\n"},
		{"GET rlflx:k", "+QUEUED\r\n"},
		{"PTTL rlflx:k", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n$1\r\n3\r\n:60000\r\n"},
		{"MULTI", "+OK\r\n"},
		{"INCRBY c 2", "+QUEUED\r\n"},
		{"SET c v EX 0", "+QUEUED\r\n"},
		{"RL.LIMIT k 2 1s", "+QUEUED\r\n"},
		{"CL.THROTTLE t 1 1 60", "+QUEUED\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"DEL c t", "+QUEUED\r\n"},
		{"EXEC", "*6\r\n:2\r\n-ERR invalid expire time in 'set' command\r\n*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n" +
			"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n+PONG\r\n:2\r\n"},
		{"MULTI", "+OK\r\n"},
		{"GET", "-ERR wrong number of arguments for 'get' command\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SCAN 0 COUNT 1000", "+QUEUED\r\n"},
		{"GET rlflx:k", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n*2\r\n$1\r\n0\r\n*1\r\n$7\r\nrlflx:k\r\n$1\r\n3\r\n"},
	})
}

// TestKVMultiAtomic: two sessions run MULTI INCR a INCR b EXEC while a third reads both in
// MULTI GET a GET b EXEC; the reader never sees them differ.
func TestKVMultiAtomic(t *testing.T) {
	eng := engine.New(engine.SystemClock{}, engine.Config{MaxMemoryBytes: 1 << 20})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	done := make(chan string, 3)
	for id := range 2 {
		go func() {
			s := commands.NewSession(int64(id), "127.0.0.1:5000", "127.0.0.1:6380", 0)
			var w resp.Writer
			for range 300 {
				for _, c := range []string{"MULTI", "INCR a", "INCR b", "EXEC"} {
					d.Serve(s, &w, split(c))
				}
				w.Reset()
			}
			done <- ""
		}()
	}
	go func() {
		s := commands.NewSession(9, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		var w resp.Writer
		for range 300 {
			for _, c := range []string{"MULTI", "GET a", "GET b"} {
				d.Serve(s, &w, split(c))
			}
			w.Reset()
			d.Serve(s, &w, split("EXEC"))
			reply := string(w.Bytes())
			both := strings.TrimPrefix(reply, "*2\r\n")
			if len(both)%2 != 0 || both[:len(both)/2] != both[len(both)/2:] { // GET a's reply, then the same for b
				done <- "a and b differ: " + reply
				return
			}
		}
		done <- ""
	}()
	for range 3 {
		if e := <-done; e != "" {
			t.Fatal(e)
		}
	}
}

func TestKVResp3AndEdge(t *testing.T) {
	r := newRig("")
	r.do("HELLO 3")
	r.run(t, []step{
		{"GET none", "_\r\n"},
		{"SET k 1 NX", "+OK\r\n"},
		{"SET k 1 NX", "_\r\n"},
		{"SET k 2 GET", "$1\r\n1\r\n"},
		{"CL.THROTTLE k2 1 1 1", "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n"},
	})
	// An edge (no origin engine) does not decide these commands.
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{})
	d := commands.New(commands.Options{Limiter: commands.Local(eng), Host: &fakeHost{}, Role: "edge"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	for cmd, want := range map[string]string{
		"GET k":                  "-ERR GET is decided by the origin; connect to the origin\r\n",
		"CL.THROTTLE k 1 1 1":    "-ERR CL.THROTTLE is decided by the origin; connect to the origin\r\n",
		"SCAN 0":                 "-ERR SCAN is decided by the origin; connect to the origin\r\n",
		"INCRBY k notchecked":    "-ERR INCRBY is decided by the origin; connect to the origin\r\n",
		"RL.LIMIT k 2 1s COST 1": "*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n",
	} {
		var w resp.Writer
		d.Serve(s, &w, split(cmd))
		if string(w.Bytes()) != want {
			t.Errorf("edge %s: %q, want %q", cmd, w.Bytes(), want)
		}
	}
}

// TestKVScanMatch: SCAN walks every key of the session's workspace once (none is added or
// removed here), with MATCH as Redis's glob.
func TestKVScanMatch(t *testing.T) {
	r := newRig("")
	keys := []string{"user:1", "user:22", "User:3", "rate:a", "rate:b", "x*y", "x?y", "a[b", "hello", "hallo", "hxllo", "heeeello"}
	for _, k := range keys {
		r.do("SET " + k + " 1")
	}
	for i := range 300 {
		r.do(fmt.Sprint("SET bulk:", i, " 1"))
	}
	scan := func(extra string) []string {
		var out []string
		cursor := "0"
		for {
			reply := r.do("SCAN " + cursor + extra)
			lines := strings.Split(reply, "\r\n")
			cursor = lines[2]
			for i := 5; i < len(lines)-1; i += 2 {
				out = append(out, lines[i])
			}
			if cursor == "0" {
				sort.Strings(out)
				return out
			}
		}
	}
	if got := scan(""); len(got) != len(keys)+300 {
		t.Fatalf("SCAN returned %d keys, want %d", len(got), len(keys)+300)
	}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"user:*", []string{"user:1", "user:22"}},
		{"[uU]ser:?", []string{"User:3", "user:1"}},
		{"h[^e]llo", []string{"hallo", "hxllo"}},
		{"h[a-b]llo", []string{"hallo"}},
		{"h[b-a]llo", []string{"hallo"}},
		{"h*llo", []string{"hallo", "heeeello", "hello", "hxllo"}},
		{"x\\*y", []string{"x*y"}},
		{"x\\?y", []string{"x?y"}},
		{"x?y", []string{"x*y", "x?y"}},
		{"a[[]b", []string{"a[b"}},
		{"rate:[ab", []string{"rate:a", "rate:b"}}, // an unterminated set, as Redis reads it
		{"bulk:29?", []string{"bulk:290", "bulk:291", "bulk:292", "bulk:293", "bulk:294", "bulk:295", "bulk:296", "bulk:297", "bulk:298", "bulk:299"}},
		{"*:*:*", nil},
	} {
		if got := scan(" COUNT 7 MATCH " + c.pattern); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("MATCH %s: %v, want %v", c.pattern, got, c.want)
		}
	}
}

// TestKVMemoryFull: a new key past --max-memory answers the store's OOM error; existing
// keys keep working.
func TestKVMemoryFull(t *testing.T) {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 16 << 10})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	var w resp.Writer
	do := func(cmd string) string { w.Reset(); d.Serve(s, &w, split(cmd)); return string(w.Bytes()) }
	var last string
	for i := 0; i < 1000; i++ {
		if last = do(fmt.Sprint("INCR k", i)); last != ":1\r\n" {
			break
		}
	}
	if last != "-OOM cell store is full (--max-memory)\r\n" {
		t.Fatalf("past the bound: %q", last)
	}
	if got := do("INCR k0"); got != ":2\r\n" {
		t.Fatalf("existing key: %q", got)
	}
	if got := do("CL.THROTTLE newkey 1 1 1"); got != "-OOM cell store is full (--max-memory)\r\n" {
		t.Fatalf("CL.THROTTLE new key: %q", got)
	}
	if got := do("RL.LIMIT newtuple 10 1s"); got != "-OOM cell store is full (--max-memory)\r\n" {
		t.Fatalf("RL.LIMIT new tuple: %q", got)
	}
}
