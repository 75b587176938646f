package commands_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

func TestParseOverride(t *testing.T) {
	tests := []struct {
		in     string
		sub    string
		key    string
		prefix bool
		window int64
		limit  uint64
		ns     string
		count  int
		err    string
	}{
		{in: "SET k 1m 10", sub: "set", key: "k", window: 60_000, limit: 10},
		{in: "set user:* 1s 5 NS api", sub: "set", key: "user:", prefix: true, window: 1000, limit: 5, ns: "api"},
		{in: "SET * 1s 5", sub: "set", key: "", prefix: true, window: 1000, limit: 5},
		{in: "GET k 1s ns api", sub: "get", key: "k", window: 1000, ns: "api"},
		{in: "DEL k* 1s", sub: "del", key: "k", prefix: true, window: 1000},
		{in: "LIST", sub: "list", count: 1000},
		{in: "LIST MATCH user:* COUNT 5 NS api", sub: "list", ns: "api", count: 5},
		{in: "SET k 1m 0", err: "ERR limit must be"},
		{in: "SET k 1m 1125899906842625", err: "ERR limit must be"},
		{in: "SET k 32d 1", err: "ERR window must be"},
		{in: "SET k 1m", err: "ERR wrong number of arguments for 'rl.override|set' command"},
		{in: "GET k", err: "ERR wrong number of arguments for 'rl.override|get' command"},
		{in: "SET k 1m 1 COUNT 1", err: "ERR syntax error"},
		{in: "SET k 1m 1 NS", err: "ERR syntax error"},
		{in: "SET k 1m 1 NS a NS a", err: "ERR syntax error"},
		{in: "GET " + strings.Repeat("k", 1025) + " 1s", err: "ERR key must be"},
		{in: "LIST COUNT 0", err: "ERR COUNT must be"},
		{in: "LIST COUNT 100001", err: "ERR COUNT must be"},
		{in: "LIST MATCH", err: "ERR syntax error"},
		{in: "LIST NS " + strings.Repeat("n", 129), err: "ERR namespace must be"},
		{in: "FLUSH", err: "ERR unknown RL.OVERRIDE subcommand"},
	}
	for _, tt := range tests {
		got, err := commands.ParseOverride(split(tt.in))
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ParseOverride(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.Sub != tt.sub || string(got.Key) != tt.key || got.Prefix != tt.prefix || got.WindowMs != tt.window ||
			got.Limit != tt.limit || string(got.Namespace) != tt.ns || got.Count != tt.count {
			t.Errorf("ParseOverride(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

// TestOverrideCommands: RL.OVERRIDE on an origin, and its effect on RL.LIMIT (one limit
// and several), RL.STATUS and a transaction's RL.LIMIT; a key without an override keeps
// the request's limit.
func TestOverrideCommands(t *testing.T) {
	r := newRig("")
	steps := []struct{ cmd, want string }{
		{"RL.OVERRIDE GET user:1 1m", "$-1\r\n"},
		{"RL.LIMIT user:1 100 1m", "*5\r\n:1\r\n:100\r\n:99\r\n:0\r\n:80000\r\n"},
		{"RL.OVERRIDE SET user:* 1m 10", "+OK\r\n"},
		{"RL.OVERRIDE SET user:1 1m 3", "+OK\r\n"},
		{"RL.OVERRIDE GET user:* 1m", ":10\r\n"},
		{"RL.OVERRIDE GET user:1 1m", ":3\r\n"},
		{"RL.LIMIT user:1 100 1m", "*5\r\n:1\r\n:3\r\n:1\r\n:0\r\n:80000\r\n"},
		{"RL.LIMIT user:2 100 1m", "*5\r\n:1\r\n:10\r\n:9\r\n:0\r\n:80000\r\n"},
		{"RL.LIMIT user:2 100 1s", "*5\r\n:1\r\n:100\r\n:99\r\n:0\r\n:2000\r\n"}, // another window
		{"RL.LIMIT user:2 100 1m NS api", "*5\r\n:1\r\n:100\r\n:99\r\n:0\r\n:80000\r\n"},
		{"RL.LIMIT other 100 1m", "*5\r\n:1\r\n:100\r\n:99\r\n:0\r\n:80000\r\n"},
		// Several limits: the minute's is overridden, the second's is not.
		{"RL.LIMIT user:1 50 1s 100 1m", "*5\r\n:1\r\n:3\r\n:0\r\n:0\r\n:80000\r\n"},
		{"RL.LIMIT user:1 50 1s 100 1m", "*5\r\n:0\r\n:3\r\n:0\r\n:40000\r\n:80000\r\n"},
		{"RL.STATUS user:2 1m", "*26\r\n$8\r\nsequence\r\n:16\r\n$9\r\nwindow_ms\r\n:60000\r\n$16\r\ncurrent_regional\r\n:1\r\n" +
			"$16\r\ncurrent_imported\r\n:0\r\n$17\r\nprevious_regional\r\n:0\r\n$17\r\nprevious_imported\r\n:0\r\n$4\r\nused\r\n:1\r\n" +
			"$6\r\nsource\r\n$6\r\norigin\r\n$5\r\nfresh\r\n:1\r\n$9\r\nstrict_ms\r\n:0\r\n$5\r\nlimit\r\n:10\r\n$9\r\nremaining\r\n:9\r\n" +
			"$14\r\nreset_after_ms\r\n:80000\r\n"},
		{"RL.STATUS other 1m LIMIT 100", "*26\r\n$8\r\nsequence\r\n:16\r\n$9\r\nwindow_ms\r\n:60000\r\n$16\r\ncurrent_regional\r\n:1\r\n" +
			"$16\r\ncurrent_imported\r\n:0\r\n$17\r\nprevious_regional\r\n:0\r\n$17\r\nprevious_imported\r\n:0\r\n$4\r\nused\r\n:1\r\n" +
			"$6\r\nsource\r\n$6\r\norigin\r\n$5\r\nfresh\r\n:1\r\n$9\r\nstrict_ms\r\n:0\r\n$5\r\nlimit\r\n:100\r\n$9\r\nremaining\r\n:99\r\n" +
			"$14\r\nreset_after_ms\r\n:80000\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RL.LIMIT user:3 100 1m", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n*5\r\n:1\r\n:10\r\n:9\r\n:0\r\n:80000\r\n"},
		// Refused in a transaction, which then aborts: nothing of it is run.
		{"MULTI", "+OK\r\n"},
		{"RL.OVERRIDE SET user:3 1m 1", "-ERR RL.OVERRIDE is not allowed inside MULTI: an override cannot be one isolated step of a transaction; send it on its own\r\n"},
		{"RL.LIMIT user:3 100 1m", "+QUEUED\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"RL.OVERRIDE GET user:3 1m", "$-1\r\n"},
		{"RL.OVERRIDE LIST", "*2\r\n*4\r\n$6\r\nuser:*\r\n:60000\r\n:10\r\n$7\r\ndefault\r\n*4\r\n$6\r\nuser:1\r\n:60000\r\n:3\r\n$7\r\ndefault\r\n"},
		{"RL.OVERRIDE LIST MATCH user:1", "*1\r\n*4\r\n$6\r\nuser:1\r\n:60000\r\n:3\r\n$7\r\ndefault\r\n"},
		{"RL.OVERRIDE LIST COUNT 1", "*1\r\n*4\r\n$6\r\nuser:*\r\n:60000\r\n:10\r\n$7\r\ndefault\r\n"},
		{"RL.OVERRIDE LIST NS api", "*0\r\n"},
		{"RL.OVERRIDE DEL user:* 1m", ":1\r\n"},
		{"RL.OVERRIDE DEL user:* 1m", ":0\r\n"},
		{"RL.LIMIT user:2 100 1m", "*5\r\n:1\r\n:100\r\n:98\r\n:0\r\n:80000\r\n"},
		{"RL.OVERRIDE SET k 1m 0", "-ERR limit must be an integer from 1 to 1125899906842624\r\n"},
		{"RL.OVERRIDE", "-ERR wrong number of arguments for 'rl.override' command\r\n"},
		{"RL.OVERRIDE FLUSH", "-ERR unknown RL.OVERRIDE subcommand: SET, GET, DEL or LIST\r\n"},
	}
	for _, st := range steps {
		if got := r.do(st.cmd); got != st.want {
			t.Errorf("%s:\n got %q\nwant %q", st.cmd, got, st.want)
		}
	}
}

// TestOverrideFull: SET beyond the origin's bound answers an error that says so.
func TestOverrideFull(t *testing.T) {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxOverrides: 2})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", Region: "local"})
	r := &rig{d: d, s: commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", clock.NowMs()), clock: clock}
	for _, st := range []struct{ cmd, want string }{
		{"RL.OVERRIDE SET a 1m 1", "+OK\r\n"},
		{"RL.OVERRIDE SET b* 1m 1", "+OK\r\n"},
		{"RL.OVERRIDE SET c 1m 1", "-ERR override table is full (2 overrides on this origin): RL.OVERRIDE DEL some first\r\n"},
		{"RL.OVERRIDE SET a 1m 2", "+OK\r\n"},
	} {
		if got := r.do(st.cmd); got != st.want {
			t.Errorf("%s:\n got %q\nwant %q", st.cmd, got, st.want)
		}
	}
}

// benchServeOverrides is benchServe on an origin holding 10000 exact overrides of other
// keys and, with prefix, the prefix "key:" over the request's key.
func benchServeOverrides(b *testing.B, prefix bool) {
	eng := engine.New(engine.SystemClock{}, engine.Config{})
	for i := range 10_000 {
		tu := engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "other:%d", i), WindowMs: 60_000}
		if err := eng.Overrides().Set(tu, false, 10); err != nil {
			b.Fatal(err)
		}
	}
	if prefix {
		if err := eng.Overrides().Set(engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("key:"), WindowMs: 60_000}, true, 1<<40); err != nil {
			b.Fatal(err)
		}
	}
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{sessions: []*commands.Session{s}}, Role: "origin", Region: "local"})
	var w resp.Writer
	benchLoop(b, d, s, &w, []string{"RL.LIMIT", "key:000000012345", "1000000000000", "60000"})
}

// BenchmarkServeRLLimitOverridesNone: RL.LIMIT of a tuple without an override, beside
// 10000 overrides of other keys (one exact lookup per request).
func BenchmarkServeRLLimitOverridesNone(b *testing.B) { benchServeOverrides(b, false) }

// BenchmarkServeRLLimitOverridesPrefix: RL.LIMIT of a tuple a prefix overrides.
func BenchmarkServeRLLimitOverridesPrefix(b *testing.B) { benchServeOverrides(b, true) }
