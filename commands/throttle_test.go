package commands_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// TestThrottleCommand: redis-cell's e2e sequence (max_burst 0, 1 per 2 s), its usage and
// parse errors, the reply for a quantity over the limit, a peek, and the state seen by GET.
func TestThrottleCommand(t *testing.T) {
	r := newRig("")
	r.clock.Set(1_700_000_000_000)
	r.run(t, []step{
		{"CL.THROTTLE user123 0 1 2 1", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:2\r\n"},
		{"cl.throttle user123 0 1 2", "*5\r\n:1\r\n:1\r\n:0\r\n:2\r\n:2\r\n"},
		{"GET user123", "$19\r\n1700000002000000000\r\n"},
		{"PTTL user123", ":2000\r\n"},
	})
	r.clock.Advance(2000)
	r.run(t, []step{
		{"CL.THROTTLE user123 0 1 2 1", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:2\r\n"},
		// 15 per 60 s with a burst of 15: redis-cell's README example.
		{"CL.THROTTLE user:1 15 30 60", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
		{"CL.THROTTLE user:1 15 30 60 0", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
		{"CL.THROTTLE user:1 15 30 60 17", "*5\r\n:1\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
		{"CL.THROTTLE user:1 15 30 60 +15", "*5\r\n:0\r\n:16\r\n:0\r\n:-1\r\n:32\r\n"},
		{"CL.THROTTLE user:1 15 30 60", "*5\r\n:1\r\n:16\r\n:0\r\n:2\r\n:32\r\n"},
		{"CL.THROTTLE k", "-Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"CL.THROTTLE", "-Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"CL.THROTTLE k 1 2 3 4 5", "-Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"CL.THROTTLE k x 1 1", "-Cell error: Couldn't parse as integer: x\r\n"},
		{"CL.THROTTLE k 1 1 1.5", "-Cell error: Couldn't parse as integer: 1.5\r\n"},
		{"CL.THROTTLE k 1 1 1 -", "-Cell error: Couldn't parse as integer: -\r\n"},
		{"CL.THROTTLE k 1 1 1 9223372036854775808", "-Cell error: Couldn't parse as integer: 9223372036854775808\r\n"},
		{"CL.THROTTLE k 1 0 1", "-Cell error: Zero rates are not supported\r\n"},
		{"CL.THROTTLE k 1 1 0", "-Cell error: Zero rates are not supported\r\n"},
		{"CL.THROTTLE k 007 1 1", "*5\r\n:0\r\n:8\r\n:7\r\n:-1\r\n:1\r\n"},
		{"SET s notatat", "+OK\r\n"},
		{"CL.THROTTLE s 1 1 1", "-Cell error: invalid digit found in string\r\n"},
	})
}

// kvFuzzCommands are the commands FuzzKVArgs sends its arguments to.
var kvFuzzCommands = []string{"GET", "SET", "SETEX", "PSETEX", "INCR", "INCRBY", "DECR", "DECRBY", "EXPIRE", "PEXPIRE",
	"EXPIREAT", "PEXPIREAT", "PERSIST", "TTL", "PTTL", "DEL", "UNLINK", "EXISTS", "TYPE", "SCAN", "CL.THROTTLE"}

// FuzzKVArgs sends arbitrary arguments to every counter command and CL.THROTTLE, alone and
// inside MULTI/EXEC: nothing panics, every reply is one well-formed RESP value, and the
// keyspace's accounting stays within the bound.
func FuzzKVArgs(f *testing.F) {
	seeds := []string{
		"k v", "k v NX EX 10", "k v XX GET PX 5", "k v KEEPTTL", "k v EXAT 1", "k v PXAT 9223372036854775807",
		"k 10 v", "k -1 v", "k 5", "k -9223372036854775808", "k 9223372036854775807", "k abc",
		"k 100 NX", "k 100 GT LT", "k 100 FOO", "k", "a b c", "0", "0 MATCH * COUNT 5", "0 MATCH [a-", "0 MATCH \\",
		"18446744073709551615 COUNT 1", "0 TYPE string", "k 1 1 1", "k 0 1 2 1", "k 1 0 1", "k -5 -5 -5 -5",
		"k 9223372036854775807 1 1 1", "k 1 1 9223372036854775807 -9223372036854775808", "k 1 3 1 0",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	clock := engine.NewManualClock(1_700_000_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 64 << 10})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		cmd := kvFuzzCommands[int(which)%len(kvFuzzCommands)]
		req := [][]byte{[]byte(cmd)}
		for _, a := range strings.Split(args, " ") {
			req = append(req, []byte(a))
		}
		checkServedAloneAndInMulti(t, d, s, req)
		clock.Advance(int64(which))
		if st := eng.Stats(); st.MemoryBytes < 0 || st.MemoryBytes > st.MaxMemoryBytes+keyspace.MaxValue+4096 {
			t.Fatalf("memory gauge %d of %d", st.MemoryBytes, st.MaxMemoryBytes)
		}
	})
}

func checkOneReply(t *testing.T, b []byte, req [][]byte) {
	t.Helper()
	if n := replyLen(b); n != len(b) {
		t.Fatalf("%q: reply %q is not one RESP value", req, b)
	}
}

// replyLen returns the length of the RESP value at the start of b, or -1.
func replyLen(b []byte) int {
	end := bytes.Index(b, []byte("\r\n"))
	if end < 1 {
		return -1
	}
	line := string(b[1:end])
	n := 0
	neg := strings.HasPrefix(line, "-")
	digits := strings.TrimPrefix(line, "-")
	switch b[0] {
	case '+', '-', ':', '_':
		return end + 2
	case '$', '*', '%':
		for _, c := range digits {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		if neg || digits == "" {
			if neg && n == 1 {
				return end + 2
			}
			return -1
		}
	default:
		return -1
	}
	pos := end + 2
	if b[0] == '$' {
		if len(b) < pos+n+2 || string(b[pos+n:pos+n+2]) != "\r\n" {
			return -1
		}
		return pos + n + 2
	}
	if b[0] == '%' {
		n *= 2
	}
	for range n {
		m := replyLen(b[pos:])
		if m < 0 {
			return -1
		}
		pos += m
	}
	return pos
}

// BenchmarkServeThrottle measures CL.THROTTLE through the dispatcher on one key (a
// decision per request, each allowed or limited), and GET and INCR beside it.
func BenchmarkServeThrottle(b *testing.B) {
	eng := engine.New(engine.SystemClock{}, engine.Config{})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	for _, c := range []string{"CL.THROTTLE user:42 100 1000000 1", "INCR counter:42", "GET counter:42"} {
		b.Run(strings.Fields(c)[0], func(b *testing.B) {
			req := split(c)
			var w resp.Writer
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				d.Serve(s, &w, req)
			}
		})
	}
}
