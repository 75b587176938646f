package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// The argument errors of SPEC section 3, word for word.
const (
	msgKey    = "ERR key must be 1 to 1024 bytes"
	msgLimit  = "ERR limit must be an integer from 1 to 1125899906842624"
	msgWindow = "ERR window must be from 1ms to 31d"
	msgCost   = "ERR cost must be an integer from 0 to 1125899906842624"
	msgNS     = "ERR namespace must be 1 to 128 bytes"
	msgSyntax = "ERR syntax error"
)

const maxLimit = 1 << 50 // 1125899906842624

// rawCounts is what an error must leave unchanged: decisions made, cells held, and the
// count of the tuple the cases use.
type rawCounts struct{ allowed, denied, cells, used string }

func readCounts(t testing.TB, c *rawConn) rawCounts {
	t.Helper()
	text, ok := c.do("INFO", "ratchet").(string)
	if !ok {
		t.Fatal("INFO ratchet did not return a bulk string")
	}
	f := infoFields(text)
	cells, ok := c.do("DBSIZE").(int64)
	if !ok {
		t.Fatal("DBSIZE did not return an integer")
	}
	st, ok := c.do("RL.STATUS", "errkey", "10m").([]any)
	if !ok {
		t.Fatal("RL.STATUS did not return an array")
	}
	var u string
	for i := 0; i+1 < len(st); i += 2 {
		if st[i] == "used" {
			u = strconv.FormatInt(st[i+1].(int64), 10)
		}
	}
	return rawCounts{f["decisions_allowed"], f["decisions_denied"], strconv.FormatInt(cells, 10), u}
}

// Test 4: every argument error of SPEC section 3 is a clear ERR naming the argument,
// counts nothing, and leaves the connection usable.
func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := dialRaw(t, p.Addr)
	if r := ints(t, c.do("RL.LIMIT", "errkey", "100", "10m")); r[0] != 1 {
		t.Fatalf("setup RL.LIMIT = %v", r)
	}
	long := func(n int) string { return strings.Repeat("k", n) }
	cases := []struct {
		name string
		args []string
		want string
	}{
		// RL.LIMIT key limit window [COST n] [NS namespace]
		{"limit/key empty", []string{"RL.LIMIT", "", "100", "10m"}, msgKey},
		{"limit/key 1025 bytes", []string{"RL.LIMIT", long(1025), "100", "10m"}, msgKey},
		{"limit/limit 0", []string{"RL.LIMIT", "errkey", "0", "10m"}, msgLimit},
		{"limit/limit -1", []string{"RL.LIMIT", "errkey", "-1", "10m"}, msgLimit},
		{"limit/limit 1.5", []string{"RL.LIMIT", "errkey", "1.5", "10m"}, msgLimit},
		{"limit/limit 2^50+1", []string{"RL.LIMIT", "errkey", "1125899906842625", "10m"}, msgLimit},
		{"limit/limit 2^64", []string{"RL.LIMIT", "errkey", "18446744073709551616", "10m"}, msgLimit},
		{"limit/limit abc", []string{"RL.LIMIT", "errkey", "abc", "10m"}, msgLimit},
		{"limit/limit space", []string{"RL.LIMIT", "errkey", " 5", "10m"}, msgLimit},
		{"limit/limit trailing space", []string{"RL.LIMIT", "errkey", "5 ", "10m"}, msgLimit},
		{"limit/limit plus", []string{"RL.LIMIT", "errkey", "+5", "10m"}, msgLimit},
		{"limit/limit leading zero", []string{"RL.LIMIT", "errkey", "05", "10m"}, msgLimit},
		{"limit/limit empty", []string{"RL.LIMIT", "errkey", "", "10m"}, msgLimit},
		{"limit/window 0", []string{"RL.LIMIT", "errkey", "100", "0"}, msgWindow},
		{"limit/window 0s", []string{"RL.LIMIT", "errkey", "100", "0s"}, msgWindow},
		{"limit/window 32d", []string{"RL.LIMIT", "errkey", "100", "32d"}, msgWindow},
		{"limit/window 31d+1ms", []string{"RL.LIMIT", "errkey", "100", "2678400001"}, msgWindow},
		{"limit/window 1.5s", []string{"RL.LIMIT", "errkey", "100", "1.5s"}, msgWindow},
		{"limit/window 10x", []string{"RL.LIMIT", "errkey", "100", "10x"}, msgWindow},
		{"limit/window empty", []string{"RL.LIMIT", "errkey", "100", ""}, msgWindow},
		{"limit/window unit only", []string{"RL.LIMIT", "errkey", "100", "ms"}, msgWindow},
		{"limit/window negative", []string{"RL.LIMIT", "errkey", "100", "-1s"}, msgWindow},
		{"limit/window go syntax", []string{"RL.LIMIT", "errkey", "100", "1m30s"}, msgWindow},
		{"limit/cost -1", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", "-1"}, msgCost},
		{"limit/cost 2^50+1", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", "1125899906842625"}, msgCost},
		{"limit/cost abc", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", "abc"}, msgCost},
		{"limit/cost empty", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", ""}, msgCost},
		{"limit/ns empty", []string{"RL.LIMIT", "errkey", "100", "10m", "NS", ""}, msgNS},
		{"limit/ns 129 bytes", []string{"RL.LIMIT", "errkey", "100", "10m", "NS", long(129)}, msgNS},
		{"limit/unknown option", []string{"RL.LIMIT", "errkey", "100", "10m", "FOO", "1"}, msgSyntax},
		{"limit/LIMIT is not an option", []string{"RL.LIMIT", "errkey", "100", "10m", "LIMIT", "1"}, msgSyntax},
		{"limit/repeated COST", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", "1", "COST", "1"}, msgSyntax},
		{"limit/repeated NS", []string{"RL.LIMIT", "errkey", "100", "10m", "NS", "a", "NS", "a"}, msgSyntax},
		{"limit/repeated cost mixed case", []string{"RL.LIMIT", "errkey", "100", "10m", "cost", "1", "CoSt", "1"}, msgSyntax},
		{"limit/missing COST value", []string{"RL.LIMIT", "errkey", "100", "10m", "COST"}, msgSyntax},
		{"limit/missing NS value", []string{"RL.LIMIT", "errkey", "100", "10m", "COST", "1", "NS"}, msgSyntax},
		{"limit/arity 2", []string{"RL.LIMIT", "errkey", "100"}, "ERR wrong number of arguments for 'rl.limit' command"},
		{"limit/arity 0", []string{"RL.LIMIT"}, "ERR wrong number of arguments for 'rl.limit' command"},

		// RL.STATUS key window [NS namespace] [LIMIT n]
		{"status/key empty", []string{"RL.STATUS", "", "10m"}, msgKey},
		{"status/key 1025 bytes", []string{"RL.STATUS", long(1025), "10m"}, msgKey},
		{"status/window 0", []string{"RL.STATUS", "errkey", "0"}, msgWindow},
		{"status/window 32d", []string{"RL.STATUS", "errkey", "32d"}, msgWindow},
		{"status/window 1.5s", []string{"RL.STATUS", "errkey", "1.5s"}, msgWindow},
		{"status/window 10x", []string{"RL.STATUS", "errkey", "10x"}, msgWindow},
		{"status/window empty", []string{"RL.STATUS", "errkey", ""}, msgWindow},
		{"status/limit 0", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "0"}, msgLimit},
		{"status/limit -1", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "-1"}, msgLimit},
		{"status/limit 2^50+1", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "1125899906842625"}, msgLimit},
		{"status/limit abc", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "abc"}, msgLimit},
		{"status/limit 05", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "05"}, msgLimit},
		{"status/ns empty", []string{"RL.STATUS", "errkey", "10m", "NS", ""}, msgNS},
		{"status/ns 129 bytes", []string{"RL.STATUS", "errkey", "10m", "NS", long(129)}, msgNS},
		{"status/unknown option", []string{"RL.STATUS", "errkey", "10m", "COST", "1"}, msgSyntax},
		{"status/repeated LIMIT", []string{"RL.STATUS", "errkey", "10m", "LIMIT", "5", "LIMIT", "5"}, msgSyntax},
		{"status/repeated NS", []string{"RL.STATUS", "errkey", "10m", "NS", "a", "ns", "a"}, msgSyntax},
		{"status/missing LIMIT value", []string{"RL.STATUS", "errkey", "10m", "LIMIT"}, msgSyntax},
		{"status/arity 1", []string{"RL.STATUS", "errkey"}, "ERR wrong number of arguments for 'rl.status' command"},
	}
	before := readCounts(t, c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := asError(t, c.do(tc.args...))
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			c.expectPong()
			if after := readCounts(t, c); after != before {
				t.Errorf("an error changed the counts: before %+v, after %+v", before, after)
			}
		})
	}
	// After all that, the tuple still counts normally on the same connection.
	if r := ints(t, c.do("RL.LIMIT", "errkey", "100", "10m")); r[0] != 1 || r[2] != 98 {
		t.Errorf("RL.LIMIT after the errors = %v, want [1 100 98 ...]", r)
	}
}

// Test 4 (cont.): the errors of the compatibility commands.
func TestCommandErrors(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := dialRaw(t, p.Addr)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"FOO", "a", "b"}, "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{[]string{"nosuch"}, "ERR unknown command 'nosuch', with args beginning with: "},
		// An error reply never carries CR or LF, whatever the request held.
		{[]string{"BAD\r\n+OK", "x\ny"}, "ERR unknown command 'BAD  +OK', with args beginning with: 'x y' "},
		// Redis echoes at most about 128 bytes of arguments (the first, clipped to 128).
		{[]string{"FOO", strings.Repeat("a", 200), strings.Repeat("b", 200)},
			"ERR unknown command 'FOO', with args beginning with: '" + strings.Repeat("a", 128) + "' "},
		{[]string{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]string{"SELECT", "abc"}, "ERR value is not an integer or out of range"},
		{[]string{"SELECT"}, "ERR wrong number of arguments for 'select' command"},
		{[]string{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
		{[]string{"AUTH", "pw"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
	}
	for _, tc := range cases {
		got := asError(t, c.do(tc.args...))
		if got != tc.want {
			t.Errorf("%q:\n got  %q\n want %q", tc.args, got, tc.want)
		}
		c.expectPong()
	}
	if v := c.do("SELECT", "0"); v != "OK" {
		t.Errorf("SELECT 0 = %#v, want OK", v)
	}
	if n, ok := c.do("DBSIZE").(int64); !ok || n != 0 {
		t.Errorf("DBSIZE after errors only = %#v, want 0", n)
	}
}

// Test 5: values at the edges of their ranges are accepted and mean what they say.
func TestArgumentBoundaries(t *testing.T) {
	t.Parallel()
	p := start(t)
	c := p.client(t, nil)
	ctx := context.Background()

	t.Run("limit 2^50", func(t *testing.T) {
		r := limitReply(t, c, "big", maxLimit, "1d")
		if r[0] != 1 || r[1] != maxLimit || r[2] != maxLimit-1 || r[3] != 0 {
			t.Errorf("got %v, want [1 %d %d 0 reset]", r, int64(maxLimit), int64(maxLimit-1))
		}
		r = limitReply(t, c, "big", maxLimit, "1d", "COST", maxLimit-1)
		if r[0] != 1 || r[2] != 0 {
			t.Errorf("COST 2^50-1 on top of 1: got %v, want allowed with remaining 0", r)
		}
		if r = limitReply(t, c, "big", maxLimit, "1d"); r[0] != 0 || r[3] <= 0 {
			t.Errorf("one more: got %v, want denied", r)
		}
		if u := used(t, c, "big", "1d"); u != maxLimit {
			t.Errorf("used = %d, want %d", u, int64(maxLimit))
		}
	})

	t.Run("limit 1", func(t *testing.T) {
		if r := limitReply(t, c, "one", 1, "1d"); r[0] != 1 || r[2] != 0 {
			t.Errorf("first: %v", r)
		}
		if r := limitReply(t, c, "one", 1, "1d"); r[0] != 0 || r[2] != 0 || r[3] <= 0 {
			t.Errorf("second: %v, want denied", r)
		}
	})

	t.Run("COST 0 is a peek", func(t *testing.T) {
		for range 3 {
			limitReply(t, c, "peek", 10, "1d")
		}
		r := limitReply(t, c, "peek", 10, "1d", "COST", 0)
		if r[0] != 1 || r[1] != 10 || r[2] != 7 || r[3] != 0 || r[4] <= 0 {
			t.Errorf("peek at 3 of 10: %v, want [1 10 7 0 reset>0]", r)
		}
		if u := used(t, c, "peek", "1d"); u != 3 {
			t.Errorf("a peek counted: used = %d, want 3", u)
		}
		if r = limitReply(t, c, "peek", 10, "1d", "COST", 7); r[0] != 1 || r[2] != 0 {
			t.Errorf("fill to 10: %v", r)
		}
		// used == limit: a peek is still allowed (used <= L), a cost of 1 is not.
		if r = limitReply(t, c, "peek", 10, "1d", "cost", 0); r[0] != 1 || r[2] != 0 || r[3] != 0 {
			t.Errorf("peek at 10 of 10: %v, want [1 10 0 0 reset]", r)
		}
		if r = limitReply(t, c, "peek", 10, "1d", "COST", 1); r[0] != 0 || r[3] <= 0 {
			t.Errorf("one more at 10 of 10: %v, want denied", r)
		}
		if u := used(t, c, "peek", "1d"); u != 10 {
			t.Errorf("used = %d, want 10", u)
		}
	})

	t.Run("peek on a fresh key", func(t *testing.T) {
		r := limitReply(t, c, "peekfresh", 10, "1d", "COST", 0)
		if want := []int64{1, 10, 10, 0, 0}; !equal(r, want) {
			t.Errorf("got %v, want %v", r, want)
		}
	})

	t.Run("COST = limit", func(t *testing.T) {
		if r := limitReply(t, c, "costeq", 5, "1d", "COST", 5); r[0] != 1 || r[2] != 0 || r[3] != 0 {
			t.Errorf("got %v, want allowed with remaining 0", r)
		}
	})

	t.Run("COST > limit is never allowed", func(t *testing.T) {
		r := limitReply(t, c, "costgt", 5, "1d", "COST", 6)
		if want := []int64{0, 5, 5, -1, 0}; !equal(r, want) {
			t.Errorf("got %v, want %v", r, want)
		}
		if u := used(t, c, "costgt", "1d"); u != 0 {
			t.Errorf("a cost over the limit counted: used = %d", u)
		}
		limitReply(t, c, "costgt", 5, "1d", "COST", 2)
		if r = limitReply(t, c, "costgt", 5, "1d", "COST", maxLimit); r[0] != 0 || r[3] != -1 || r[2] != 3 {
			t.Errorf("COST 2^50 over limit 5: got %v, want [0 5 3 -1 reset]", r)
		}
	})

	t.Run("windows", func(t *testing.T) {
		cases := []struct {
			window string
			ms     int64
		}{
			{"1ms", 1}, {"1", 1}, {"1500", 1500}, {"1500ms", 1500}, {"60s", 60_000}, {"1m", 60_000},
			{"1h", 3_600_000}, {"1d", dayMs}, {"31d", 31 * dayMs}, {"2678400000", 31 * dayMs},
			{"2678400000ms", 31 * dayMs}, {"44640m", 31 * dayMs}, {"744h", 31 * dayMs},
			{"1500MS", 1500}, {"1500Ms", 1500}, {"60S", 60_000}, {"1M", 60_000}, {"1H", 3_600_000},
			{"1D", dayMs}, {"31D", 31 * dayMs},
		}
		for i, tc := range cases {
			key := "w:" + strconv.Itoa(i)
			r := limitReply(t, c, key, 100, tc.window)
			if r[0] != 1 || r[2] != 99 {
				t.Errorf("window %q: RL.LIMIT = %v, want allowed", tc.window, r)
				continue
			}
			if r[4] > 2*tc.ms {
				t.Errorf("window %q: reset_after_ms %d is beyond two windows of %d ms", tc.window, r[4], tc.ms)
			}
			st, _ := status(t, c, key, tc.window)
			if got, ok := st["window_ms"]; ok && got != tc.ms {
				t.Errorf("window %q: window_ms = %v, want %d", tc.window, got, tc.ms)
			}
			if tc.ms >= 60_000 {
				if u := statusInt(t, st, "used"); u != 1 {
					t.Errorf("window %q: used = %d, want 1", tc.window, u)
				}
			}
		}
		// Spellings of one window are one tuple.
		for _, w := range []string{"60s", "1m", "60000", "60000ms", "1M", "60S"} {
			limitReply(t, c, "samewin", 100, w)
		}
		if u := used(t, c, "samewin", "1m"); u != 6 {
			t.Errorf("60s, 1m, 60000, 60000ms, 1M and 60S counted as %d on one tuple, want 6", u)
		}
	})

	t.Run("keywords in any case", func(t *testing.T) {
		if r := limitReply(t, c, "kw", 10, "1d", "cost", 2, "Ns", "tenant"); r[0] != 1 || r[2] != 8 {
			t.Errorf("cost/Ns: %v", r)
		}
		if r := limitReply(t, c, "kw", 10, "1d", "nS", "tenant", "CoSt", 3); r[0] != 1 || r[2] != 5 {
			t.Errorf("nS/CoSt (options in any order): %v", r)
		}
		if v, err := c.Do(ctx, "rl.limit", "kw", 10, "1d", "ns", "tenant").Result(); err != nil {
			t.Errorf("lower-case command name: %v", err)
		} else if r := fiveInts(t, v); r[2] != 4 {
			t.Errorf("rl.limit: %v", r)
		}
		st, _ := status(t, c, "kw", "1d", "ns", "tenant", "limit", 10)
		if u, rem := statusInt(t, st, "used"), statusInt(t, st, "remaining"); u != 6 || rem != 4 {
			t.Errorf("RL.STATUS ns/limit: used %d remaining %d, want 6 and 4", u, rem)
		}
		// The namespace is part of the tuple: the default namespace saw nothing.
		if u := used(t, c, "kw", "1d"); u != 0 {
			t.Errorf("default namespace used = %d, want 0", u)
		}
		if u := used(t, c, "kw", "1d", "NS", "default"); u != 0 {
			t.Errorf("NS default used = %d, want 0", u)
		}
	})

	t.Run("key and namespace lengths", func(t *testing.T) {
		key := strings.Repeat("k", 1024)
		ns := strings.Repeat("n", 128)
		if r := limitReply(t, c, key, 10, "1d", "NS", ns); r[0] != 1 {
			t.Errorf("1024-byte key in a 128-byte namespace: %v", r)
		}
		if u := used(t, c, key, "1d", "NS", ns); u != 1 {
			t.Errorf("used = %d", u)
		}
		// Any bytes: NUL, CR, LF, invalid UTF-8.
		bin := "a\x00b\r\nc\xff"
		if r := limitReply(t, c, bin, 10, "1d", "NS", bin); r[0] != 1 || r[2] != 9 {
			t.Errorf("binary key: %v", r)
		}
		if u := used(t, c, bin, "1d", "NS", bin); u != 1 {
			t.Errorf("binary key used = %d", u)
		}
		if u := used(t, c, "a", "1d", "NS", bin); u != 0 {
			t.Errorf("binary key leaked into key \"a\": used = %d", u)
		}
	})
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
