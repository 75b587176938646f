package commands_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
)

func TestParseLimits(t *testing.T) {
	tests := []struct {
		in      string
		limits  []uint64
		windows []int64
		cost    uint64
		ns      string
		err     string
	}{
		{in: "k 10 1s", limits: []uint64{10}, windows: []int64{1000}, cost: 1},
		{in: "k 10 1s 1000 1h", limits: []uint64{10, 1000}, windows: []int64{1000, 3600000}, cost: 1},
		{in: "k 10 1s 1000 1h COST 3 NS api", limits: []uint64{10, 1000}, windows: []int64{1000, 3600000}, cost: 3, ns: "api"},
		{in: "k 10 1s 1000 1h ns api cost 0", limits: []uint64{10, 1000}, windows: []int64{1000, 3600000}, ns: "api"},
		{in: "k 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8 8", limits: []uint64{1, 2, 3, 4, 5, 6, 7, 8}, windows: []int64{1, 2, 3, 4, 5, 6, 7, 8}, cost: 1},
		{in: "k 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8 8 9 9", err: "ERR at most 8 limit and window pairs in one RL.LIMIT"},
		{in: "k 10 1s 20", err: "ERR limit without a window: limits and windows come in pairs"},
		{in: "k 10 1s 20 COST 1", err: "ERR window must be from 1ms to 31d"},
		{in: "k 10 1s 20 1000ms", err: "ERR window 1000ms appears twice: each limit needs a window of its own"},
		{in: "k 10 1s 0 1m", err: "ERR limit must be"},
		{in: "k 10 1s 05 1m", err: "ERR limit must be"},
		{in: "k 10 1s 1125899906842625 1m", err: "ERR limit must be"},
		{in: "k 10 1s 5 32d", err: "ERR window must be"},
		{in: "k 10 1s 5 1m COST", err: "ERR syntax error"},
		{in: "k 10 1s 5 1m COST 1 COST 1", err: "ERR syntax error"},
		{in: "k 10 1s 5 1m COST x", err: "ERR cost must be"},
		{in: "k 10 1s 5 1m BURST 1", err: "ERR syntax error"},
		{in: "k 10 1s 5 1m NS " + strings.Repeat("n", 129), err: "ERR namespace must be"},
		{in: " 10 1s 5 1m", err: "ERR key must be"},
		{in: "k COST 1 1s", err: "ERR limit must be"},
		{in: "k 10", err: "ERR syntax error"},
	}
	for _, tt := range tests {
		got, err := commands.ParseLimits(split(tt.in))
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ParseLimits(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.N != len(tt.limits) || got.Cost != tt.cost || string(got.Namespace) != tt.ns || string(got.Key) != "k" {
			t.Errorf("ParseLimits(%q) = %+v, %v", tt.in, got, err)
			continue
		}
		for i := range tt.limits {
			if got.Limits[i] != tt.limits[i] || got.WindowsMs[i] != tt.windows[i] {
				t.Errorf("ParseLimits(%q) pair %d = %d %d, want %d %d", tt.in, i, got.Limits[i], got.WindowsMs[i], tt.limits[i], tt.windows[i])
			}
		}
	}
}

// FuzzParseLimits checks that no argument list makes the multi-limit parser panic, that
// every error is an ERR reply, that whatever it accepts is within the contract's ranges
// (1 to 8 pairs, distinct windows), and that on one pair it agrees with ParseLimit, the
// single-limit parser of the hot path. Its seed corpus runs with every go test.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"k 10 1s 1000 1h", "k 10 1s 1000 1h COST 3 NS api", "k 100 60s", "k 1 1s COST", "k 10 1s 20",
		"k 10 1s 20 1000ms", "k 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8 8 9 9", "k 1125899906842624 31d 1 1ms cost 0 ns x",
		"k 99999999999999999999 1s 1 1", "k 1 1s 1 18446744073709551616ms", "k 1 1s 2 2s NS a NS a", "k 0 0 0 0", "k 5 5 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := split(s)
		a, err := commands.ParseLimits(args)
		single, serr := commands.ParseLimit(args)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("error without ERR prefix: %v", err)
			}
			if serr == nil {
				t.Fatalf("%q: ParseLimit accepts %+v, ParseLimits refuses: %v", s, single, err)
			}
			return
		}
		if a.N < 1 || a.N > 8 || len(a.Key) < 1 || len(a.Key) > 1024 || a.Cost > 1<<50 ||
			(a.Namespace != nil && (len(a.Namespace) < 1 || len(a.Namespace) > 128)) {
			t.Fatalf("accepted out-of-range arguments %+v from %q", a, s)
		}
		for i := 0; i < a.N; i++ {
			if a.Limits[i] < 1 || a.Limits[i] > 1<<50 || a.WindowsMs[i] < 1 || a.WindowsMs[i] > 2678400000 {
				t.Fatalf("accepted out-of-range pair %d of %+v from %q", i, a, s)
			}
			for j := 0; j < i; j++ {
				if a.WindowsMs[i] == a.WindowsMs[j] {
					t.Fatalf("accepted window %d twice from %q", a.WindowsMs[i], s)
				}
			}
		}
		if a.N == 1 {
			if serr != nil || single.Limit != a.Limits[0] || single.WindowMs != a.WindowsMs[0] || single.Cost != a.Cost ||
				string(single.Key) != string(a.Key) || string(single.Namespace) != string(a.Namespace) {
				t.Fatalf("%q: ParseLimits %+v, ParseLimit %+v, %v", s, a, single, serr)
			}
		} else if serr == nil {
			t.Fatalf("%q: ParseLimit accepts %d pairs", s, a.N)
		}
	})
}

// TestServeLimitMulti: RL.LIMIT with two limits on an origin answers the binding limit's
// five integers and counts in both windows or neither, alone and inside MULTI/EXEC.
func TestServeLimitMulti(t *testing.T) {
	r := newRig("")
	for _, tt := range []struct{ cmd, want string }{
		// 1s: remaining 1, 1m: remaining 2: the 1s limit binds.
		{"RL.LIMIT k 2 1s 3 1m", "*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n"},
		{"RL.LIMIT k 2 1s 3 1m", "*5\r\n:1\r\n:2\r\n:0\r\n:0\r\n:2000\r\n"},
		// 1s denies, 1m would allow: denied by 1s, counted in neither.
		{"RL.LIMIT k 2 1s 3 1m", "*5\r\n:0\r\n:2\r\n:0\r\n:1500\r\n:2000\r\n"},
		{"RL.STATUS k 1m", "*20\r\n$8\r\nsequence\r\n:16\r\n$9\r\nwindow_ms\r\n:60000\r\n$16\r\ncurrent_regional\r\n:2\r\n*"},
		{"RL.LIMIT k 2 1s 3 1m COST 0", "*5\r\n:1\r\n:2\r\n:0\r\n:0\r\n:2000\r\n"}, // a peek
		// One limit that can never pass binds over a retry.
		{"RL.LIMIT k 10 1h 2 1s COST 3", "*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:2000\r\n"},
		{"RL.LIMIT k 2 1s 3", "-ERR limit without a window: limits and windows come in pairs\r\n"},
		{"RL.LIMIT k 2 1s 3 1000ms", "-ERR window 1000ms appears twice: each limit needs a window of its own\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RL.LIMIT k 5 1h 3 1m", "+QUEUED\r\n"},
		{"RL.LIMIT k 5 1h 2 1m", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n*5\r\n:1\r\n:3\r\n:0\r\n:0\r\n:80000\r\n*5\r\n:0\r\n:2\r\n:0\r\n:60000\r\n:80000\r\n"},
		{"RL.STATUS k 1h", "*20\r\n$8\r\nsequence\r\n:0\r\n$9\r\nwindow_ms\r\n:3600000\r\n$16\r\ncurrent_regional\r\n:1\r\n*"},
		{"MULTI", "+OK\r\n"},
		{"RL.LIMIT k 5 1h 3", "-ERR limit without a window: limits and windows come in pairs\r\n"},
	} {
		got := r.do(tt.cmd)
		if pre, ok := strings.CutSuffix(tt.want, "*"); ok && strings.HasPrefix(got, pre) {
			continue
		}
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
}

// TestCommandDocsMultiLimit: COMMAND DOCS describes the (limit, window) pairs as a
// repeatable block, so redis-cli hints "key limit window [limit window ...]".
func TestCommandDocsMultiLimit(t *testing.T) {
	r := newRig("")
	got := r.do("COMMAND DOCS rl.limit")
	want := "$4\r\nname\r\n$6\r\nlimits\r\n$4\r\ntype\r\n$5\r\nblock\r\n$5\r\nflags\r\n*1\r\n+multiple\r\n$9\r\narguments\r\n*2\r\n"
	if !strings.Contains(got, want) {
		t.Fatalf("COMMAND DOCS rl.limit lacks the repeatable pairs %q: %q", want, got)
	}
}

// BenchmarkServeRLLimitTwo is BenchmarkServeRLLimit with two limits in one call (the
// issue's budget: at most 1.6x a single limit's CPU).
func BenchmarkServeRLLimitTwo(b *testing.B) {
	benchServe(b, 2, "RL.LIMIT", "key:000000012345", "1000000000000", "60000", "1000000000000", "3600000")
}

// TestServeReset: RL.RESET on an origin zeroes the tuples of its windows (in one
// namespace), answers how many held usage, and checks its arguments; inside MULTI it is
// refused, and the transaction aborts.
func TestServeReset(t *testing.T) {
	r := newRig("")
	for _, tt := range []struct{ cmd, want string }{
		{"RL.LIMIT login:alice 2 1s", "*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n"},
		{"RL.LIMIT login:alice 2 1s", "*5\r\n:1\r\n:2\r\n:0\r\n:0\r\n:2000\r\n"},
		{"RL.LIMIT login:alice 2 1s", "*5\r\n:0\r\n:2\r\n:0\r\n:1500\r\n:2000\r\n"},
		{"RL.LIMIT login:alice 5 1m NS other", "*5\r\n:1\r\n:5\r\n:4\r\n:0\r\n:80000\r\n"},
		{"RL.RESET login:alice 1s 1m 1000ms", ":1\r\n"}, // 1m of the default namespace held nothing
		{"RL.LIMIT login:alice 2 1s", "*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n"},
		{"RL.LIMIT login:alice 5 1m NS other", "*5\r\n:1\r\n:5\r\n:3\r\n:0\r\n:80000\r\n"},
		{"rl.reset login:alice 1m ns other", ":1\r\n"},
		{"RL.RESET login:alice 1m NS other", ":0\r\n"},
		{"RL.LIMIT login:alice 5 1m NS other", "*5\r\n:1\r\n:5\r\n:4\r\n:0\r\n:80000\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RL.RESET login:alice 1s", "-ERR RL.RESET is not allowed inside MULTI: a reset cannot be one isolated step of a transaction; send it on its own\r\n"},
		{"RL.LIMIT login:alice 2 1s", "+QUEUED\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"RL.LIMIT login:alice 2 1s", "*5\r\n:1\r\n:2\r\n:0\r\n:0\r\n:2000\r\n"}, // neither ran
		{"RL.RESET login:alice", "-ERR wrong number of arguments for 'rl.reset' command\r\n"},
		{"RL.RESET login:alice 0", "-ERR window must be from 1ms to 31d\r\n"},
		{"RL.RESET login:alice 1s NS", "-ERR syntax error\r\n"},
		{"RL.RESET login:alice NS x", "-ERR syntax error\r\n"},
		{"RL.RESET login:alice 1s NS x y", "-ERR syntax error\r\n"},
		{"RL.RESET login:alice 1s COST 1", "-ERR window must be from 1ms to 31d\r\n"},
	} {
		if got := r.do(tt.cmd); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
}

// FuzzParseReset checks that no argument list makes RL.RESET's parser panic, that every
// error is an ERR reply, and that what it accepts is within the contract's ranges (1 to 64
// distinct windows, a key and a namespace of their lengths).
func FuzzParseReset(f *testing.F) {
	for _, s := range []string{"k 15m", "k 1s 1m 1h NS api", "k 1s 1000ms", "k NS x", "k 1s NS", "k 1s NS a b", "k 0", "k 31d 32d",
		"k 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := commands.ParseReset(split(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("error without ERR prefix: %v", err)
			}
			return
		}
		if len(a.Windows) < 1 || len(a.Windows) > 64 || len(a.Key) < 1 || len(a.Key) > 1024 ||
			(a.Namespace != nil && (len(a.Namespace) < 1 || len(a.Namespace) > 128)) {
			t.Fatalf("accepted out-of-range arguments %+v from %q", a, s)
		}
		for i, w := range a.Windows {
			if w < 1 || w > 2678400000 || slices.Contains(a.Windows[:i], w) {
				t.Fatalf("accepted window %d (twice, or out of range) from %q", w, s)
			}
		}
	})
}
