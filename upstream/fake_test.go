package upstream

import (
	"context"
	"errors"
	"log/slog"
	"net"
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
	helloErr   string                              // if set, HELLO is answered with this error
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
				h, err := wire.ParseHello(argv)
				if err != nil || args[0] != wire.CmdHello {
					f.t.Errorf("fake origin: first command %q, want RL.INTERNAL.HELLO: %v", args, err)
					return
				}
				f.mu.Lock()
				f.hellos = append(f.hellos, args)
				f.mu.Unlock()
				f.wait(f.helloWait)
				if f.helloErr != "" {
					w.Error(f.helloErr)
				} else if string(h.Secret) != f.secret {
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

// cannedBoot is the origin boot canned replies carry; cannedNow the origin's clock in
// those to READ and REPLAY.
const (
	cannedBoot = 1763898912000
	cannedNow  = 1763898913234
)

// canned answers every internal command as an origin does: it decodes the request with
// package wire's Parse* (a malformed one gets an error reply, "ERR internal: " and wire's
// error) and answers with wire's Write*Reply, every integer of the reply made from the
// request so that a field decoded into the wrong place shows:
//
//	READ   key seq limit want          -> meta 3, 6, 10000, cannedBoot, cannedNow, 0; per item
//	                                      [seq, len(key), seq%7, 2*len(key), 1, want, limit]
//	REPLAY id boot key seq cost limit want return
//	                                   -> meta 2, id, 5000, cannedBoot, cannedNow, 0; per item
//	                                      [seq, 100+cost, id, limit, 9, want, return]
//	DECIDE key limit cost pending inflight batch want return deadline
//	                                   -> meta 5, 6, 7000, cannedBoot, deadline, 0; allowed cost<=limit,
//	                                      limit, remaining limit-cost or 0, retry 0 or -1,
//	                                      reset 1234, [17, pending, inflight, batch, cost,
//	                                      want, return]
func canned(args []string) answer {
	var w resp.Writer
	argv := make([][]byte, len(args))
	for i, a := range args {
		argv[i] = []byte(a)
	}
	var err error
	switch args[0] {
	case wire.CmdRead:
		var items []engine.ReadItem
		if items, err = wire.ParseRead(argv); err != nil {
			break
		}
		counts := make([]engine.CellCounts, len(items))
		for i, it := range items {
			n := uint64(len(it.Key))
			counts[i] = engine.CellCounts{Seq: it.Seq, CurRegional: n, CurImported: uint64(it.Seq % 7),
				PrevRegional: 2 * n, PrevImported: 1, LeaseLeft: it.Want, LeaseSeq: it.Limit}
		}
		wire.WriteCountsReply(&w, engine.OriginMeta{Edges: 3, Applied: 6, LeaseTTLMs: 10000, Boot: cannedBoot, Now: cannedNow}, counts)
	case wire.CmdReplay:
		var b engine.ReplayBatch
		if b, err = wire.ParseReplay(argv); err != nil {
			break
		}
		counts := make([]engine.CellCounts, len(b.Items))
		for i, it := range b.Items {
			counts[i] = engine.CellCounts{Seq: it.Seq, CurRegional: 100 + it.Cost, CurImported: b.ID, PrevRegional: it.Limit,
				PrevImported: 9, LeaseLeft: it.Want, LeaseSeq: it.Return}
		}
		wire.WriteCountsReply(&w, engine.OriginMeta{Edges: 2, Applied: b.ID, LeaseTTLMs: 5000, Boot: cannedBoot, Now: cannedNow}, counts)
	case wire.CmdDecide:
		var r engine.DecideRequest
		if r, err = wire.ParseDecide(argv); err != nil {
			break
		}
		dec := engine.Decision{Allowed: r.Cost <= r.Limit, Limit: r.Limit, RetryAfterMs: -1, ResetAfterMs: 1234}
		if dec.Allowed {
			dec.Remaining, dec.RetryAfterMs = r.Limit-r.Cost, 0
		}
		wire.WriteDecideReply(&w, dec, engine.CellCounts{Seq: 17, CurRegional: r.Pending, CurImported: r.Inflight,
			PrevRegional: r.InflightBatch, PrevImported: r.Cost, LeaseLeft: r.Want, LeaseSeq: r.Return},
			engine.OriginMeta{Edges: 5, Applied: 6, LeaseTTLMs: 7000, Boot: cannedBoot, Now: r.Deadline})
	case wire.CmdDecideMulti:
		var r engine.DecideMultiRequest
		if r, err = wire.ParseDecideMulti(argv); err != nil {
			break
		}
		ds, ccs := make([]engine.Decision, len(r.Items)), make([]engine.CellCounts, len(r.Items))
		for i, it := range r.Items {
			ds[i] = engine.Decision{Allowed: r.Cost <= it.Limit, Limit: it.Limit, Remaining: it.Limit - min(it.Limit, r.Cost), ResetAfterMs: int64(i)}
			ccs[i] = engine.CellCounts{Seq: int64(i), CurRegional: it.Pending, CurImported: it.Inflight, PrevRegional: r.InflightBatch,
				LeaseLeft: it.Want, LeaseSeq: it.Return}
		}
		wire.WriteDecideMultiReply(&w, ds, ccs, engine.OriginMeta{Edges: 4, Applied: 2, LeaseTTLMs: 7000, Boot: cannedBoot, Now: r.Deadline, Hand: 9})
	default:
		w.Error("ERR unknown command '" + args[0] + "'")
	}
	if err != nil {
		w.Reset()
		w.Error("ERR internal: " + err.Error())
	}
	return answer{reply: string(w.Bytes())}
}

// ints is the RESP array of v, as an origin writes a reply of integers.
func ints(v ...int64) string {
	var w resp.Writer
	w.Array(len(v))
	for _, n := range v {
		w.Int(n)
	}
	return string(w.Bytes())
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

// atOnce bounds a call that must return without waiting: where the behaviour under test
// waits instead, it waits for a gate the test keeps closed, for DialTimeout 10 s, or
// forever. A loaded 2-core machine under -race delays a call by hundreds of milliseconds,
// not by seconds, so a bound near the call's own timeout (tens of ms) would be a flake.
const atOnce = 5 * time.Second

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
