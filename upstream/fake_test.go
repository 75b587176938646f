package upstream

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// answer is what the fake origin does with one request.
type answer struct {
	reply  string          // raw RESP
	wait   <-chan struct{} // if set, wait for it (or the fake's end) before going on
	hangup bool            // close the connection instead of replying (after wait)
}

// fakeOrigin is a tiny origin: it parses requests with resp.Parse, checks that each
// connection starts with RL.INTERNAL.HELLO, and answers with handler (canned by default).
type fakeOrigin struct {
	t          testing.TB
	ln         net.Listener
	secret     string
	helloWait  <-chan struct{}                     // if set, HELLO is answered only once it is closed
	record     bool                                // keep hellos and cmds
	raw        func(argv [][]byte, w *resp.Writer) // if set, answers instead of handler, without allocating
	done       chan struct{}                       // closed by close
	wg         sync.WaitGroup
	mu         sync.Mutex
	handler    func(args []string) answer
	conns      int
	hellos     [][]string
	cmds       [][]string
	open       map[net.Conn]bool
	closedOnce sync.Once
}

func newFake(t testing.TB, secret string) *fakeOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeOrigin{t: t, ln: ln, secret: secret, record: true, done: make(chan struct{}),
		handler: canned, open: make(map[net.Conn]bool)}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeOrigin) addr() string { return f.ln.Addr().String() }

func (f *fakeOrigin) setHandler(h func(args []string) answer) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func (f *fakeOrigin) stats() (conns int, hellos, cmds [][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns, append([][]string(nil), f.hellos...), append([][]string(nil), f.cmds...)
}

// close stops the fake: no more connections, open ones closed, stalls released.
func (f *fakeOrigin) close() {
	f.closedOnce.Do(func() {
		close(f.done)
		_ = f.ln.Close()
		f.mu.Lock()
		for nc := range f.open {
			_ = nc.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
}

func (f *fakeOrigin) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		f.open[nc] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(nc)
	}
}

func (f *fakeOrigin) wait(ch <-chan struct{}) {
	if ch != nil {
		select {
		case <-ch:
		case <-f.done:
		}
	}
}

func (f *fakeOrigin) serve(nc net.Conn) {
	defer f.wg.Done()
	defer func() {
		_ = nc.Close()
		f.mu.Lock()
		delete(f.open, nc)
		f.mu.Unlock()
	}()
	lim := resp.DefaultLimits()
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 64<<10)
	var w resp.Writer
	var argvBuf [][]byte
	authed := false
	for {
		n, err := nc.Read(tmp)
		if n == 0 && err != nil {
			return
		}
		buf = append(buf, tmp[:n]...)
		off := 0
		for {
			argv, used, perr := resp.Parse(buf[off:], argvBuf, lim)
			if perr != nil {
				f.t.Errorf("fake origin: %v", perr)
				return
			}
			if used == 0 {
				break
			}
			off += used
			argvBuf = argv[:0]
			if authed && f.raw != nil {
				f.raw(argv, &w)
				continue
			}
			args := make([]string, len(argv))
			for i, a := range argv {
				args[i] = string(a)
			}
			if !authed {
				if len(args) != 3 || args[0] != wire.CmdHello {
					f.t.Errorf("fake origin: first command %q, want RL.INTERNAL.HELLO", args)
					return
				}
				f.mu.Lock()
				f.hellos = append(f.hellos, args)
				f.mu.Unlock()
				f.wait(f.helloWait)
				if args[1] != f.secret {
					w.Error("WRONGPASS invalid cluster secret")
				} else {
					authed = true
					w.OK()
				}
				continue
			}
			f.mu.Lock()
			if f.record {
				f.cmds = append(f.cmds, args)
			}
			h := f.handler
			f.mu.Unlock()
			a := h(args)
			if a.wait != nil {
				if _, err := nc.Write(w.Bytes()); err != nil { // what was answered so far
					return
				}
				w.Reset()
				f.wait(a.wait)
			}
			if a.hangup {
				return
			}
			w.Raw([]byte(a.reply))
		}
		buf = buf[:copy(buf, buf[off:])]
		if w.Len() > 0 {
			if _, err := nc.Write(w.Bytes()); err != nil {
				return
			}
			w.Reset()
		}
		if err != nil {
			return
		}
	}
}

// canned answers every internal command with counts made from its arguments, in the
// replies of package wire. It reads its arguments leniently (tests send keys that are not
// tuple keys, and costs beyond int64), so it does not use wire's request decoders:
//
//	READ   key seq       -> edges 3, applied 6, [seq, len(key), seq%7, 2*len(key), 1]
//	REPLAY id key seq c limit -> edges 2, applied id, [seq, 100+c, id, 0, 9]
//	DECIDE key l c p i b -> edges 5, applied 6, allowed c<=l, limit l, remaining l-c or 0,
//	                        retry 0 or -1, reset 1234, [17, p, 2, 3, 4]
func canned(args []string) answer {
	var w resp.Writer
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			i, _ := strconv.ParseInt(s, 10, 64)
			return uint64(i)
		}
		if n > math.MaxInt64 {
			return n % 1000
		}
		return n
	}
	switch args[0] {
	case wire.CmdRead:
		counts := make([]engine.CellCounts, (len(args)-1)/2)
		for i := range counts {
			key, seq := args[1+2*i], num(args[2+2*i])
			counts[i] = engine.CellCounts{Seq: int64(seq), CurRegional: uint64(len(key)), CurImported: seq % 7,
				PrevRegional: 2 * uint64(len(key)), PrevImported: 1}
		}
		wire.WriteCountsReply(&w, engine.OriginMeta{Edges: 3, Applied: 6}, counts)
	case wire.CmdReplay:
		id := num(args[1])
		counts := make([]engine.CellCounts, (len(args)-2)/4)
		for i := range counts {
			seq, cost := num(args[3+4*i]), num(args[4+4*i])
			counts[i] = engine.CellCounts{Seq: int64(seq), CurRegional: 100 + cost, CurImported: id, PrevImported: 9}
		}
		wire.WriteCountsReply(&w, engine.OriginMeta{Edges: 2, Applied: id}, counts)
	case wire.CmdDecide:
		limit, cost, extra := num(args[2]), num(args[3]), num(args[4])
		dec := engine.Decision{Allowed: cost <= limit, Limit: limit, RetryAfterMs: -1, ResetAfterMs: 1234}
		if dec.Allowed {
			dec.Remaining, dec.RetryAfterMs = limit-cost, 0
		}
		wire.WriteDecideReply(&w, dec, engine.CellCounts{Seq: 17, CurRegional: extra, CurImported: 2, PrevRegional: 3, PrevImported: 4},
			engine.OriginMeta{Edges: 5, Applied: 6})
	default:
		w.Error("ERR unknown command '" + args[0] + "'")
	}
	return answer{reply: string(w.Bytes())}
}

// newClient returns a client of addr that logs nowhere, closed at the end of the test.
func newClient(t testing.TB, addr string, cfg Config) *Client {
	t.Helper()
	cfg.Addr = addr
	if cfg.NodeRun == "" {
		cfg.NodeRun = "edge-1/boot"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := New(cfg)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls cond for up to 5 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// countingHandler counts log records by level.
type countingHandler struct {
	mu     sync.Mutex
	counts map[slog.Level]int
	msgs   []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make(map[slog.Level]int)
	}
	h.counts[r.Level]++
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[l]
}

func (h *countingHandler) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.msgs)
}
