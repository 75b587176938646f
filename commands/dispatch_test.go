package commands_test

import (
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

type fakeHost struct{ sessions []*commands.Session }

func (h *fakeHost) Sessions() []server.Session {
	out := make([]server.Session, len(h.sessions))
	for i, s := range h.sessions {
		out[i] = s
	}
	return out
}
func (h *fakeHost) ConnStats() server.ConnStats {
	return server.ConnStats{Connected: len(h.sessions), Port: 6380}
}

type rig struct {
	d     *commands.Dispatcher
	s     *commands.Session
	w     resp.Writer
	clock *engine.ManualClock
}

func newRig(pass string) *rig {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 20})
	s := commands.NewSession(7, "127.0.0.1:5000", "127.0.0.1:6380", clock.NowMs())
	h := &fakeHost{sessions: []*commands.Session{s}}
	d := commands.New(commands.Options{Origin: eng, Host: h, RequirePass: pass, Role: "origin", Region: "local",
		Version: "test", Config: map[string]string{"save": "", "maxclients": "10"}})
	return &rig{d: d, s: s, clock: clock}
}

// do serves one command (words split on spaces) and returns the raw reply.
func (r *rig) do(cmd string) string {
	r.w.Reset()
	r.d.Serve(r.s, &r.w, split(cmd))
	return string(r.w.Bytes())
}

func TestDispatch(t *testing.T) {
	r := newRig("")
	tests := []struct{ cmd, want string }{
		{"PING", "+PONG\r\n"},
		{"ping hi", "$2\r\nhi\r\n"},
		{"RL.LIMIT k 2 1s", "*5\r\n:1\r\n:2\r\n:1\r\n:0\r\n:2000\r\n"},
		{"rl.limit k 2 1s", "*5\r\n:1\r\n:2\r\n:0\r\n:0\r\n:2000\r\n"},
		{"RL.LIMIT k 2 1s", "*5\r\n:0\r\n:2\r\n:0\r\n:1500\r\n:2000\r\n"}, // next cell at 500 ms: used 2*500/1000 = 1
		{"RL.LIMIT k 2 1s COST 3", "*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:2000\r\n"},
		{"RL.LIMIT k", "-ERR wrong number of arguments for 'rl.limit' command\r\n"},
		{"RL.LIMIT k 0 1s", "-ERR limit must be an integer from 1 to 1125899906842624\r\n"},
		{"FOO a b", "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"},
		{"SELECT 0", "+OK\r\n"},
		{"SELECT 1", "-ERR DB index is out of range\r\n"},
		{"DBSIZE", ":1\r\n"},
		{"CLIENT ID", ":7\r\n"},
		{"CLIENT GETNAME", "$-1\r\n"},
		{"CLIENT SETNAME app", "+OK\r\n"},
		{"CLIENT GETNAME", "$3\r\napp\r\n"},
		{"CONFIG GET save", "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{"CONFIG GET nothing", "*0\r\n"},
		{"COMMAND COUNT", ":119\r\n"},
		{"HELLO 4", "-NOPROTO unsupported protocol version\r\n"},
		{"AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
	}
	for _, tt := range tests {
		if got := r.do(tt.cmd); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
}

func TestStatusResp3(t *testing.T) {
	r := newRig("")
	r.do("RL.LIMIT k 10 1s COST 4")
	if got := r.do("RL.STATUS k 1s"); !strings.HasPrefix(got, "*20\r\n$8\r\nsequence\r\n:1000\r\n") {
		t.Fatalf("RESP2 status = %q", got)
	}
	if got := r.do("HELLO 3"); !strings.HasPrefix(got, "%7\r\n$6\r\nserver\r\n$7\r\nratchet\r\n") || !strings.Contains(got, "$5\r\nproto\r\n:3\r\n") {
		t.Fatalf("HELLO 3 = %q", got)
	}
	got := r.do("RL.STATUS k 1s LIMIT 10")
	for _, want := range []string{"%13\r\n", "$4\r\nused\r\n:4\r\n", "$6\r\nsource\r\n$6\r\norigin\r\n", "$9\r\nremaining\r\n:6\r\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("RESP3 status %q lacks %q", got, want)
		}
	}
	if got := r.do("CLIENT GETNAME"); got != "_\r\n" {
		t.Fatalf("RESP3 null = %q", got)
	}
}

func TestAuth(t *testing.T) {
	r := newRig("s3cret")
	steps := []struct{ cmd, want string }{
		{"PING", "-NOAUTH Authentication required.\r\n"},
		{"RL.LIMIT k 1 1s", "-NOAUTH Authentication required.\r\n"},
		{"HELLO 3", "-NOAUTH HELLO must be called"},
		{"AUTH wrong", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH bob s3cret", "-WRONGPASS"},
		{"AUTH DEFAULT s3cret", "-WRONGPASS"},
		{"HELLO 3 AUTH default wrong", "-WRONGPASS"},
		{"PING", "-NOAUTH"},
		{"AUTH default s3cret", "+OK\r\n"},
		{"PING", "+PONG\r\n"},
	}
	for _, s := range steps {
		if got := r.do(s.cmd); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%s = %q, want prefix %q", s.cmd, got, s.want)
		}
	}
	r2 := newRig("s3cret")
	if got := r2.do("HELLO 3 AUTH default s3cret SETNAME a"); !strings.HasPrefix(got, "%7") {
		t.Fatalf("HELLO with AUTH = %q", got)
	}
	if got := r2.do("CLIENT GETNAME"); got != "$1\r\na\r\n" {
		t.Fatalf("name after HELLO SETNAME = %q", got)
	}
}

// TestErrorsCountNothing: every argument error leaves the tuple as it was.
func TestErrorsCountNothing(t *testing.T) {
	r := newRig("")
	r.do("RL.LIMIT k 10 1m")
	for _, bad := range []string{"RL.LIMIT k 10 1m COST", "RL.LIMIT k 10 1m COST -1", "RL.LIMIT k 10 1m NS a NS b",
		"RL.LIMIT k 10 1m XX 1", "RL.LIMIT k 10 0", "RL.LIMIT k 1.0 1m", "RL.LIMIT k 10 1m COST 1 COST 1"} {
		if got := r.do(bad); !strings.HasPrefix(got, "-ERR ") {
			t.Fatalf("%s = %q, want an ERR", bad, got)
		}
	}
	if got := r.do("RL.STATUS k 1m"); !strings.Contains(got, "$4\r\nused\r\n:1\r\n") {
		t.Fatalf("status after errors = %q", got)
	}
}

func TestCommandDocs(t *testing.T) {
	r := newRig("")
	got := r.do("COMMAND DOCS rl.limit")
	for _, want := range []string{"$8\r\nrl.limit\r\n", "$7\r\nsummary\r\n", "$5\r\ntoken\r\n$4\r\nCOST\r\n", "+optional\r\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("COMMAND DOCS lacks %q: %q", want, got)
		}
	}
	if got := r.do("COMMAND INFO rl.limit nope"); !strings.HasPrefix(got, "*2\r\n*10\r\n$8\r\nrl.limit\r\n:-4\r\n") || !strings.HasSuffix(got, "$-1\r\n") {
		t.Fatalf("COMMAND INFO = %q", got)
	}
	if got := r.do("INFO ratchet"); !strings.Contains(got, "# Ratchet\r\nrole:origin\r\n") || strings.Contains(got, "# Server") {
		t.Fatalf("INFO ratchet = %q", got)
	}
	if got := r.do("CLIENT LIST"); !strings.Contains(got, "id=7 addr=127.0.0.1:5000") || !strings.Contains(got, "cmd=client") {
		t.Fatalf("CLIENT LIST = %q", got)
	}
}

func BenchmarkServeLimit(b *testing.B) {
	r := newRig("")
	args := split("RL.LIMIT user:42 1000000000 1h")
	b.ReportAllocs()
	for b.Loop() {
		r.w.Reset()
		r.d.Serve(r.s, &r.w, args)
	}
}

// TestAuthWithoutPassword follows Redis: with no password, "AUTH pw" is an error, while
// "AUTH default pw" and "HELLO 3 AUTH default pw" succeed (clients configured with a
// password still connect); other users are refused.
func TestAuthWithoutPassword(t *testing.T) {
	r := newRig("")
	for _, s := range []struct{ cmd, want string }{
		{"AUTH pw", "-ERR AUTH <password> called without any password configured"},
		{"AUTH default pw", "+OK\r\n"},
		{"AUTH bob pw", "-WRONGPASS"},
		{"HELLO 3 AUTH default pw", "%7\r\n"},
		{"HELLO 3 AUTH bob pw", "-WRONGPASS"},
	} {
		if got := r.do(s.cmd); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%s = %q, want prefix %q", s.cmd, got, s.want)
		}
	}
}

func TestUnknownCommandEchoIsBounded(t *testing.T) {
	r := newRig("")
	got := r.do("FOO " + strings.Repeat("a", 100) + " " + strings.Repeat("b", 100) + " c")
	want := "-ERR unknown command 'FOO', with args beginning with: '" + strings.Repeat("a", 100) + "' '" + strings.Repeat("b", 28) + "' \r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestBatchTime: with BatchTime, RL.LIMIT decides at the instant the server read the batch
// (Session.Touch), not at the engine clock's reading.
func TestBatchTime(t *testing.T) {
	clock := engine.NewManualClock(1_000_000) // the engine's clock never moves here
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 20})
	s := commands.NewSession(7, "127.0.0.1:5000", "127.0.0.1:6380", clock.NowMs())
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin", BatchTime: true})
	serve := func() string {
		var w resp.Writer
		d.Serve(s, &w, split("RL.LIMIT k 1 1000"))
		return string(w.Bytes())
	}
	allowed := func(reply string) bool { return strings.HasPrefix(reply, "*5\r\n:1\r\n") }
	s.Touch(1_000_000)
	if r := serve(); !allowed(r) {
		t.Fatalf("first request: %q", r)
	}
	if r := serve(); allowed(r) {
		t.Fatalf("second request in the same window was allowed: %q", r)
	}
	s.Touch(1_005_000) // a batch read five windows later
	if r := serve(); !allowed(r) {
		t.Fatalf("a batch read in a later window was decided at the clock's instant: %q", r)
	}
}
