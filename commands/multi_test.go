package commands_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

const (
	allowed5 = "*5\r\n:1\r\n:5\r\n" // RL.LIMIT allowed against limit 5 (then remaining...)
	queued   = "+QUEUED\r\n"
	execAbrt = "-EXECABORT Transaction discarded because of previous errors.\r\n"
)

// TestMulti checks every reply of the transaction commands, in RESP2 and RESP3. Each case
// runs on a fresh server; want is the exact reply, or a prefix when it ends with "...".
func TestMulti(t *testing.T) {
	type step struct{ cmd, want2, want3 string }
	same := func(cmd, want string) step { return step{cmd, want, want} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"exec runs the queue", []step{
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("PING", queued),
			same("RL.LIMIT k 5 1s COST 2", queued),
			same("EXEC", "*3\r\n*5\r\n:1\r\n:5\r\n:4\r\n:0\r\n:2000\r\n+PONG\r\n*5\r\n:1\r\n:5\r\n:2\r\n:0\r\n:2000\r\n"),
			step{"RL.STATUS k 1s", "*20\r\n$8\r\nsequence\r\n:1000\r\n...", "%10\r\n$8\r\nsequence\r\n:1000\r\n..."},
		}},
		{"status inside", []step{
			same("RL.LIMIT k 5 1s COST 3", allowed5+"..."),
			same("MULTI", "+OK\r\n"),
			same("RL.STATUS k 1s LIMIT 5", queued),
			step{"EXEC", "*1\r\n*26\r\n$8\r\nsequence\r\n...", "*1\r\n%13\r\n$8\r\nsequence\r\n..."},
		}},
		{"empty", []step{same("MULTI", "+OK\r\n"), same("EXEC", "*0\r\n")}},
		{"an error reply stays an element", []step{
			same("MULTI", "+OK\r\n"),
			same("CLIENT BOGUS", queued),
			same("RL.LIMIT k 5 1s", queued),
			same("EXEC", "*2\r\n-ERR unknown subcommand or wrong number of arguments for 'BOGUS'. Try CLIENT HELP.\r\n"+allowed5+":4\r\n:0\r\n:2000\r\n"),
		}},
		{"argument error aborts", []step{
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("RL.LIMIT k 0 1s", "-ERR limit must be an integer from 1 to 1125899906842624\r\n"),
			same("RL.STATUS k 1s LIMIT x", "-ERR limit must be an integer from 1 to 1125899906842624\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("EXEC", execAbrt),
			same("EXEC", "-ERR EXEC without MULTI\r\n"),
			same("RL.LIMIT k 5 1s", allowed5+":4\r\n:0\r\n:2000\r\n"), // nothing was counted
		}},
		{"unknown command aborts", []step{
			same("MULTI", "+OK\r\n"),
			same("FOO a", "-ERR unknown command 'FOO', with args beginning with: 'a' \r\n"),
			same("PING", queued),
			same("EXEC", execAbrt),
		}},
		{"arity error aborts", []step{
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k", "-ERR wrong number of arguments for 'rl.limit' command\r\n"),
			same("EXEC", execAbrt),
		}},
		{"exec with arguments aborts", []step{
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("EXEC now", "-EXECABORT Transaction discarded because of: ERR wrong number of arguments for 'exec' command\r\n"),
			same("DISCARD", "-ERR DISCARD without MULTI\r\n"),
			same("RL.LIMIT k 5 1s", allowed5+":4\r\n:0\r\n:2000\r\n"),
		}},
		{"discard", []step{
			same("DISCARD", "-ERR DISCARD without MULTI\r\n"),
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("DISCARD", "+OK\r\n"),
			same("EXEC", "-ERR EXEC without MULTI\r\n"),
			same("RL.LIMIT k 5 1s", allowed5+":4\r\n:0\r\n:2000\r\n"),
		}},
		{"nested multi keeps the transaction", []step{
			same("MULTI", "+OK\r\n"),
			same("MULTI", "-ERR MULTI calls can not be nested\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("EXEC", "*1\r\n"+allowed5+":4\r\n:0\r\n:2000\r\n"),
		}},
		{"watch", []step{
			same("WATCH k", "+OK\r\n"),
			same("WATCH", "-ERR wrong number of arguments for 'watch' command\r\n"),
			same("UNWATCH", "+OK\r\n"),
			same("MULTI", "+OK\r\n"),
			same("WATCH k", "-ERR WATCH inside MULTI is not allowed\r\n"),
			same("UNWATCH", queued),
			same("EXEC", "*1\r\n+OK\r\n"),
		}},
		{"reset refused inside multi", []step{
			same("RL.LIMIT k 5 1s", allowed5+":4\r\n:0\r\n:2000\r\n"),
			same("MULTI", "+OK\r\n"),
			same("RL.RESET k 1s", "-ERR RL.RESET is not allowed inside MULTI: a reset cannot be one isolated step of a transaction; send it on its own\r\n"),
			same("EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"),
			same("RL.LIMIT k 5 1s", allowed5+":3\r\n:0\r\n:2000\r\n"), // nothing was reset
		}},
		{"client list shows the queue", []step{
			same("MULTI", "+OK\r\n"),
			same("PING", queued),
			same("CLIENT INFO", queued),
			same("EXEC", "*2\r\n+PONG\r\n$..."),
		}},
		{"quit inside multi", []step{
			same("MULTI", "+OK\r\n"),
			same("RL.LIMIT k 5 1s", queued),
			same("QUIT", "+OK\r\n"),
		}},
	}
	for _, proto := range []int{2, 3} {
		for _, tt := range tests {
			t.Run(tt.name+"/resp"+string(rune('0'+proto)), func(t *testing.T) {
				r := newRig("")
				if proto == 3 {
					r.do("HELLO 3")
				}
				for _, s := range tt.steps {
					want := s.want2
					if proto == 3 {
						want = s.want3
					}
					got := r.do(s.cmd)
					if p, ok := strings.CutSuffix(want, "..."); ok && strings.HasPrefix(got, p) {
						continue
					}
					if got != want {
						t.Fatalf("%s = %q, want %q", s.cmd, got, want)
					}
				}
				if tt.name == "quit inside multi" && (r.s.InMulti() || !r.s.Closing()) {
					t.Fatalf("after QUIT: in multi %v, closing %v", r.s.InMulti(), r.s.Closing())
				}
			})
		}
	}
}

// TestMultiCopiesArguments: a queued command keeps its own arguments, not the server's
// read buffer, which the next read overwrites.
func TestMultiCopiesArguments(t *testing.T) {
	r := newRig("")
	r.do("MULTI")
	args := split("RL.LIMIT aaa 5 1s")
	r.w.Reset()
	r.d.Serve(r.s, &r.w, args)
	copy(args[1], "bbb")
	r.do("EXEC")
	if got := r.do("RL.STATUS aaa 1s"); !strings.Contains(got, "$4\r\nused\r\n:1\r\n") {
		t.Fatalf("key aaa after EXEC: %q", got)
	}
	if got := r.do("RL.STATUS bbb 1s"); !strings.Contains(got, "$4\r\nused\r\n:0\r\n") {
		t.Fatalf("key bbb after EXEC: %q", got)
	}
}

// TestMultiBounds: past 10,000 commands or 4 MiB the command answers an error and the
// transaction aborts; then it holds nothing.
func TestMultiBounds(t *testing.T) {
	r := newRig("")
	r.do("MULTI")
	for i := range 10_000 {
		if got := r.do("RL.LIMIT k 5 1s"); got != queued {
			t.Fatalf("command %d = %q", i, got)
		}
	}
	if got := r.do("RL.LIMIT k 5 1s"); !strings.HasPrefix(got, "-ERR transaction too large") {
		t.Fatalf("command 10001 = %q", got)
	}
	if got := r.do("PING"); got != queued {
		t.Fatalf("after the bound = %q", got)
	}
	if got := r.do("EXEC"); got != execAbrt {
		t.Fatalf("EXEC = %q", got)
	}
	if got := r.do("RL.STATUS k 1s"); !strings.Contains(got, "$4\r\nused\r\n:0\r\n") {
		t.Fatalf("counted by an aborted transaction: %q", got)
	}

	r.do("MULTI")
	big := strings.Repeat("x", 3<<20)
	if got := r.do("ECHO " + big); got != queued {
		t.Fatalf("first 3 MiB = %q", got)
	}
	if got := r.do("ECHO " + big); !strings.HasPrefix(got, "-ERR transaction too large") {
		t.Fatalf("second 3 MiB = %q", got)
	}
	if got := r.do("EXEC"); got != execAbrt {
		t.Fatalf("EXEC = %q", got)
	}
}

// TestMultiNoAuth: MULTI needs authentication like any command.
func TestMultiNoAuth(t *testing.T) {
	r := newRig("pw")
	for _, s := range []struct{ cmd, want string }{
		{"MULTI", "-NOAUTH Authentication required.\r\n"},
		{"EXEC", "-NOAUTH Authentication required.\r\n"},
		{"AUTH pw", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"AUTH pw", queued},
		{"EXEC", "*1\r\n+OK\r\n"},
	} {
		if got := r.do(s.cmd); got != s.want {
			t.Fatalf("%s = %q, want %q", s.cmd, got, s.want)
		}
	}
}

// waitLimiter is an edge-like limiter: TryLimit decides only while local is set; Limit
// always decides (it would wait on the network). It counts the cost it accepted.
type waitLimiter struct {
	local    bool
	counted  atomic.Int64
	tryCalls atomic.Int64
}

func (l *waitLimiter) Limit(_ context.Context, _ engine.Tuple, limit, cost uint64) (engine.Decision, error) {
	l.counted.Add(int64(cost))
	return engine.Decision{Allowed: true, Limit: limit}, nil
}

func (l *waitLimiter) TryLimit(t engine.Tuple, limit, cost uint64, _ int64) (engine.Decision, bool, error) {
	l.tryCalls.Add(1)
	if !l.local {
		return engine.Decision{}, false, nil
	}
	d, err := l.Limit(context.Background(), t, limit, cost)
	return d, true, err
}

func (l *waitLimiter) Status(context.Context, engine.Tuple) engine.Status {
	return engine.Status{WindowMs: 1000}
}
func (l *waitLimiter) Stats() edge.Stats   { return edge.Stats{} }
func (l *waitLimiter) Clock() engine.Clock { return engine.NewManualClock(1_000_000) }

// TestMultiEdgeNoWait: on an edge served from an event loop (NoWait), an EXEC holding RL
// commands decides nothing and writes nothing: it sets WouldBlock and keeps the queue, and
// the EXEC served again without NoWait runs it once.
func TestMultiEdgeNoWait(t *testing.T) {
	for _, local := range []bool{false, true} {
		lim := &waitLimiter{local: local}
		s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 1_000_000)
		s.NoWait = true
		d := commands.New(commands.Options{Limiter: lim, Host: &fakeHost{}, Role: "edge"})
		var w resp.Writer
		serve := func(cmd string) string {
			w.Reset()
			d.Serve(s, &w, split(cmd))
			return string(w.Bytes())
		}
		serve("MULTI")
		serve("RL.LIMIT k 5 1s")
		serve("RL.LIMIT k 5 1s COST 2")
		if got := serve("EXEC"); got != "" || !s.WouldBlock {
			t.Fatalf("EXEC under NoWait: reply %q, WouldBlock %v", got, s.WouldBlock)
		}
		if lim.counted.Load() != 0 || lim.tryCalls.Load() != 0 {
			t.Fatalf("EXEC under NoWait decided: counted %d, tries %d", lim.counted.Load(), lim.tryCalls.Load())
		}
		s.WouldBlock, s.NoWait = false, false
		if got := serve("EXEC"); !strings.HasPrefix(got, "*2\r\n*5\r\n:1\r\n:5\r\n") {
			t.Fatalf("EXEC served again = %q", got)
		}
		if lim.counted.Load() != 3 || s.InMulti() {
			t.Fatalf("after EXEC: counted %d (want 3), in multi %v", lim.counted.Load(), s.InMulti())
		}
		// A queue without RL commands never waits.
		s.NoWait = true
		serve("MULTI")
		serve("PING")
		if got := serve("EXEC"); got != "*1\r\n+PONG\r\n" || s.WouldBlock {
			t.Fatalf("EXEC of PING under NoWait = %q, WouldBlock %v", got, s.WouldBlock)
		}
	}
}

// TestMultiConcurrentNeverInterleave: two sessions run transactions of two RL.LIMIT on
// one key at once; each transaction's two remainings are consecutive.
func TestMultiConcurrentNeverInterleave(t *testing.T) {
	eng := engine.New(engine.SystemClock{}, engine.Config{MaxMemoryBytes: 1 << 20})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	const rounds = 500
	errs := make(chan string, 2)
	for id := range 2 {
		go func() {
			s := commands.NewSession(int64(id), "127.0.0.1:5000", "127.0.0.1:6380", 0)
			var w resp.Writer
			for range rounds {
				for _, c := range []string{"MULTI", "RL.LIMIT hot 1000000 1d", "RL.LIMIT hot 1000000 1d"} {
					d.Serve(s, &w, split(c))
				}
				w.Reset()
				d.Serve(s, &w, split("EXEC"))
				v, err := readExec(w.Bytes())
				if err != "" {
					errs <- err
					return
				}
				if v[0] != v[1]+1 {
					errs <- "remainings not consecutive: " + string(w.Bytes())
					return
				}
			}
			errs <- ""
		}()
	}
	for range 2 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

// readExec returns the remaining field of each RL.LIMIT reply in an EXEC reply of two.
func readExec(b []byte) ([2]int64, string) {
	var out [2]int64
	lines := strings.Split(string(b), "\r\n")
	if len(lines) != 14 || lines[0] != "*2" || lines[1] != "*5" || lines[7] != "*5" {
		return out, "EXEC reply " + string(b)
	}
	for i, l := range []string{lines[4], lines[10]} {
		n, err := strconv.ParseInt(strings.TrimPrefix(l, ":"), 10, 64)
		if err != nil {
			return out, "EXEC reply " + string(b)
		}
		out[i] = n
	}
	return out, ""
}

// BenchmarkExec100 measures a transaction of 100 RL.LIMIT on 100 keys: queueing (argument
// copies) and the EXEC that decides them under their shard locks.
func BenchmarkExec100(b *testing.B) {
	eng := engine.New(engine.SystemClock{}, engine.Config{})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	reqs := make([][][]byte, 100)
	for i := range reqs {
		reqs[i] = split("RL.LIMIT key:" + strconv.Itoa(i) + " 1000000000000 60000")
	}
	multi, exec := split("MULTI"), split("EXEC")
	var w resp.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		d.Serve(s, &w, multi)
		for _, r := range reqs {
			d.Serve(s, &w, r)
		}
		d.Serve(s, &w, exec)
	}
}
