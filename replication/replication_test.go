package replication_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/replication"
	"github.com/ratchet/ratchet/server"
)

// These tests run real region origins in-process: an Engine, a RESP server with the
// command dispatcher (RL.INTERNAL.PUBLISH on its listener) and a Replicator pushing to the
// other regions' listeners over TCP.

// t0 is a realistic instant; every test cell is a 60 s window that the shared manual
// clock never leaves, so no cell rolls over while replication runs.
const t0 int64 = 1_704_067_200_000 + 1000

// waitFor bounds every wait for a condition: generous, since on a loaded 2-core machine
// under -race an exchange can miss its Timeout and be retried after a backoff (5 s once
// left TestLongKeysReachPeer's anti-entropy of 2 MiB short, with one failure).
const (
	interval = 50 * time.Millisecond
	waitFor  = 20 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tup(key string) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(key), WindowMs: 60_000}
}

// region is one region's origin: engine, listener and (once started) replicator.
type region struct {
	t       *testing.T
	name    string
	clock   *engine.ManualClock
	eng     *engine.Engine
	srv     *server.Server
	addr    string
	secret  string
	served  chan error
	stopSrv sync.Once

	repl    atomic.Pointer[replication.Replicator]
	cancel  context.CancelFunc
	ran     chan struct{}
	stopRpl sync.Once
}

// newRegion starts a region's origin listening on addr ("" picks a port) with an empty
// engine; its cluster secret is secret.
func newRegion(t *testing.T, name, addr, secret string, clock *engine.ManualClock) *region {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	r := &region{t: t, name: name, clock: clock, secret: secret, served: make(chan error, 1)}
	r.eng = engine.New(clock, engine.Config{Region: name, Logger: quiet})
	r.srv = server.New(server.Config{Addr: addr, MaxClients: 100, Logger: quiet})
	var err error
	for range 50 { // the port of a region just shut down may take a moment to be free
		if err = r.srv.Listen(); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.addr = r.srv.Addr().String()
	disp := commands.New(commands.Options{
		Origin: r.eng, ClusterSecret: secret, Host: r.srv, Role: "origin", Region: name, Version: "test",
		PeerRegions: map[string]bool{"a": true, "b": true, "c": true},
		OnImport: func(from string, rows, _ int) {
			if rp := r.repl.Load(); rp != nil {
				rp.Received(from, rows)
			}
		},
	})
	go func() { r.served <- r.srv.Serve(disp) }()
	t.Cleanup(r.stop)
	return r
}

// replicate starts the region's Replicator towards peers.
func (r *region) replicate(peers ...*region) {
	r.t.Helper()
	var ps []replication.Peer
	for _, p := range peers {
		ps = append(ps, replication.Peer{Region: p.name, Addr: p.addr})
	}
	r.replicateTo(r.secret, ps...)
}

func (r *region) replicateTo(secret string, peers ...replication.Peer) {
	r.t.Helper()
	rp, err := replication.New(replication.Config{Threshold: 0.2, Peers: peers, Secret: secret, Interval: interval,
		Timeout: time.Second, Logger: quiet}, r.eng)
	if err != nil {
		r.t.Fatal(err)
	}
	r.repl.Store(rp)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.ran = cancel, make(chan struct{})
	go func() { defer close(r.ran); rp.Run(ctx) }()
}

// stopReplication cancels Run and waits for it to return, bounded.
func (r *region) stopReplication() {
	r.stopRpl.Do(func() {
		if r.cancel == nil {
			return
		}
		r.cancel()
		select {
		case <-r.ran:
		case <-time.After(waitFor):
			r.t.Errorf("%s: Run did not return %v after its context ended", r.name, waitFor)
		}
	})
}

// stopServer shuts the listener and every connection down.
func (r *region) stopServer() {
	r.stopSrv.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := r.srv.Shutdown(ctx); err != nil {
			r.t.Errorf("%s: shutdown: %v", r.name, err)
		}
		if err := <-r.served; err != nil {
			r.t.Errorf("%s: serve: %v", r.name, err)
		}
	})
}

func (r *region) stop() {
	r.stopReplication()
	r.stopServer()
}

func (r *region) count(key string, limit, cost uint64) {
	r.t.Helper()
	d, err := r.eng.Limit(tup(key), limit, cost)
	if err != nil || !d.Allowed {
		r.t.Fatalf("%s: Limit(%s, %d, %d) = %+v, %v", r.name, key, limit, cost, d, err)
	}
}

func (r *region) status(key string) engine.Status { return r.eng.Status(tup(key)) }

func (r *region) stats(peer string) replication.PeerStats {
	r.t.Helper()
	for _, s := range r.repl.Load().Stats() {
		if s.Region == peer {
			return s
		}
	}
	r.t.Fatalf("%s: no stats for peer %s", r.name, peer)
	return replication.PeerStats{}
}

// TestPublishBothWays: a cell past the threshold in A shows up as imported in B, and B's
// count goes back to A; each side's regional stays its own, and the stats tell the story.
func TestPublishBothWays(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "s", clock)
	a.replicate(b)
	b.replicate(a)
	testwait.UntilTrue(t, waitFor, "both peers up", func() bool { return a.stats("b").Up && b.stats("a").Up })

	a.count("k", 100, 30) // 30 >= 0.2*100: due
	testwait.UntilTrue(t, waitFor, "A's 30 imported in B", func() bool { return b.status("k").CurrentImported == 30 })
	b.count("k", 100, 25)
	testwait.UntilTrue(t, waitFor, "B's 25 imported in A", func() bool { return a.status("k").CurrentImported == 25 })
	if st := b.status("k"); st.CurrentRegional != 25 || st.CurrentImported != 30 {
		t.Fatalf("B reads regional %d imported %d, want 25 30", st.CurrentRegional, st.CurrentImported)
	}
	if st := a.status("k"); st.CurrentRegional != 30 || st.Used() != 55 {
		t.Fatalf("A reads regional %d used %d, want 30 55", st.CurrentRegional, st.Used())
	}
	// Every growth of a cell with a foreign count is published, however small.
	a.count("k", 100, 1)
	testwait.UntilTrue(t, waitFor, "A's growth to 31 imported in B", func() bool { return b.status("k").CurrentImported == 31 })

	// A cell below threshold stays home while the connection lasts.
	a.count("quiet", 100, 5)
	time.Sleep(6 * interval)
	if st := b.status("quiet"); st.CurrentImported != 0 {
		t.Fatalf("a cell at 5%% of its limit was published: B imported %d", st.CurrentImported)
	}

	// Replication reads the engine's clock: after it moves, heartbeats stamp the new time.
	clock.Advance(10_000)
	for _, c := range []struct {
		r    *region
		peer string
	}{{a, "b"}, {b, "a"}} {
		s := c.r.stats(c.peer)
		if !s.Up || s.Failures != 0 || s.Syncs < 1 || s.Published < 1 || s.Imported < 1 || s.ImportedMs != t0 {
			t.Fatalf("%s's stats of %s: %+v (ImportedMs want %d)", c.r.name, c.peer, s, t0)
		}
		testwait.UntilTrue(t, waitFor, fmt.Sprintf("%s heartbeats %s at the new time", c.r.name, c.peer), func() bool {
			return c.r.stats(c.peer).LastOKMs == clock.NowMs()
		})
		if s.Addr == "" || s.Region != c.peer {
			t.Fatalf("stats name %q at %q", s.Region, s.Addr)
		}
	}
	if got := a.stats("b").Published; got < 2 {
		t.Fatalf("A published %d components to B, want at least 30 and 31", got)
	}
}

// TestRestartedPeerGetsItsRowBack: B's origin dies and comes back empty on the same
// address. A notices (heartbeat), reconnects and pushes everything it holds: B gets its
// own published count back as regional, and A's as imported, with no new traffic.
func TestRestartedPeerGetsItsRowBack(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "s", clock)
	a.replicate(b)
	b.replicate(a)
	b.count("k", 100, 40)
	a.count("k", 100, 20)
	testwait.UntilTrue(t, waitFor, "B's 40 in A", func() bool { return a.status("k").CurrentImported == 40 })
	testwait.UntilTrue(t, waitFor, "A's 20 in B", func() bool { return b.status("k").CurrentImported == 20 })
	testwait.UntilTrue(t, waitFor, "A synced B once", func() bool { return a.stats("b").Syncs >= 1 })
	syncs := a.stats("b").Syncs

	b.stop()
	b2 := newRegion(t, "b", b.addr, "s", clock)
	if st := b2.status("k"); st.CurrentRegional != 0 || st.CurrentImported != 0 {
		t.Fatalf("the new B is not empty: %+v", st)
	}
	b2.replicate(a)
	testwait.UntilTrue(t, waitFor, "B's own 40 back from A", func() bool { return b2.status("k").CurrentRegional == 40 })
	testwait.UntilTrue(t, waitFor, "A's 20 back in B", func() bool { return b2.status("k").CurrentImported == 20 })
	// B's row may come back through B's own exchange with A before A has redialled B.
	testwait.UntilTrue(t, waitFor, "A synced the new B", func() bool { return a.stats("b").Syncs > syncs })
	// B's restored row is not B's growth: A still reads 40, and after B counts more, the
	// growth goes out (a foreign count exists) on top of the restored count.
	b2.count("k", 100, 2)
	testwait.UntilTrue(t, waitFor, "B's 42 in A", func() bool { return a.status("k").CurrentImported == 42 })
	if st := a.status("k"); st.CurrentRegional != 20 {
		t.Fatalf("A's regional %d, want 20", st.CurrentRegional)
	}
	testwait.UntilTrue(t, waitFor, "A up with B again", func() bool { return a.stats("b").Up })
}

// TestDownPeerCatchesUp: B is down while A counts; A's publication waits (lag grows), and
// when B comes up it gets everything by anti-entropy.
func TestDownPeerCatchesUp(t *testing.T) {
	clock := engine.NewManualClock(t0)
	// Reserve an address for B, then free it.
	b0 := newRegion(t, "b", "", "s", clock)
	addr := b0.addr
	b0.stop()

	a := newRegion(t, "a", "", "s", clock)
	a.replicateTo("s", replication.Peer{Region: "b", Addr: addr})
	testwait.UntilTrue(t, waitFor, "A fails to reach B", func() bool { return a.stats("b").Failures >= 1 })
	a.count("k", 100, 30)
	a.count("k2", 1000, 300)
	testwait.UntilTrue(t, waitFor, "a publication waits for B", func() bool {
		clock.Advance(1) // the lag is measured by the shared manual clock
		return a.stats("b").LagMs > 0
	})
	clock.Advance(3 * interval.Milliseconds())
	if s := a.stats("b"); s.Up || s.LagMs < 3*interval.Milliseconds() {
		t.Fatalf("B down: stats %+v, want not up and a lag of at least %v", s, 3*interval)
	}

	b := newRegion(t, "b", addr, "s", clock)
	b.replicate(a)
	testwait.UntilTrue(t, waitFor, "B catches up", func() bool {
		return b.status("k").CurrentImported == 30 && b.status("k2").CurrentImported == 300
	})
	testwait.UntilTrue(t, waitFor, "A sees B up with no lag", func() bool { s := a.stats("b"); return s.Up && s.LagMs == 0 })
	a.count("k", 100, 1)
	testwait.UntilTrue(t, waitFor, "new growth reaches B", func() bool { return b.status("k").CurrentImported == 31 })
}

// TestWrongSecret: a peer with another cluster secret gets nothing and gives nothing; the
// failures show in the stats.
func TestWrongSecret(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "other", clock)
	a.replicate(b) // with "s", refused by B
	b.replicate(a) // with "other", refused by A
	a.count("k", 100, 50)
	b.count("k", 100, 50)
	testwait.UntilTrue(t, waitFor, "failures on both sides", func() bool {
		return a.stats("b").Failures >= 2 && b.stats("a").Failures >= 2
	})
	time.Sleep(4 * interval)
	for _, r := range []*region{a, b} {
		if st := r.status("k"); st.CurrentImported != 0 || st.CurrentRegional != 50 {
			t.Fatalf("%s: regional %d imported %d, want 50 0", r.name, st.CurrentRegional, st.CurrentImported)
		}
		for _, s := range r.repl.Load().Stats() {
			if s.Up || s.Syncs != 0 || s.Published != 0 || s.Imported != 0 || s.LastOKMs != 0 {
				t.Fatalf("%s: stats with a wrong secret: %+v", r.name, s)
			}
		}
	}
}

// TestFlushOnStop: Run's context ending publishes what is due and delivers it before Run
// returns (SIGTERM flushes publications), even with a long publish interval.
func TestFlushOnStop(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "s", clock)
	rp, err := replication.New(replication.Config{Threshold: 0.2, Peers: []replication.Peer{{Region: "b", Addr: b.addr}},
		Secret: "s", Interval: time.Hour, Timeout: time.Second, Logger: quiet}, a.eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testwait.UntilTrue(t, waitFor, "A up", func() bool { return rp.Stats()[0].Up })
	a.count("k", 100, 30)
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	if st := b.status("k"); st.CurrentImported != 30 {
		t.Fatalf("after Run returned, B imported %d, want 30", st.CurrentImported)
	}
	if s := rp.Stats()[0]; s.Up || s.Published != 1 {
		t.Fatalf("stats after stop: %+v", s)
	}
}

// TestNoGoroutineLeak: after Run's context ends (with one peer up and one down) and the
// servers shut down, the goroutine count returns to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		clock := engine.NewManualClock(t0)
		a := newRegion(t, "a", "", "s", clock)
		b := newRegion(t, "b", "", "s", clock)
		c := newRegion(t, "c", "", "s", clock)
		downAddr := c.addr
		c.stop()
		a.replicateTo("s", replication.Peer{Region: "b", Addr: b.addr}, replication.Peer{Region: "c", Addr: downAddr})
		b.replicate(a)
		a.count("k", 100, 30)
		testwait.UntilTrue(t, waitFor, "A's 30 in B", func() bool { return b.status("k").CurrentImported == 30 })
		testwait.UntilTrue(t, waitFor, "A failing on C", func() bool { return a.stats("c").Failures >= 2 })
		start := time.Now()
		a.stopReplication()
		b.stopReplication()
		// Stopping delivers what is queued once more, bounded by Timeout (1 s): five of it
		// leave a loaded machine room (a stop that never returns hangs the test).
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("stopping took %v", d)
		}
		a.stopServer()
		b.stopServer()
	}()
	deadline := time.Now().Add(waitFor)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			var sb strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&sb, 1)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, sb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLagBackToZero: once a publication is delivered and nothing else is due, LagMs is 0.
// Publish one growth at a time, many times, and check after each delivery.
//
// The publisher queues a batch (p.queue <- b) and only then marks the queue's oldest time
// (oldestMs.CompareAndSwap(0, now)); when the sender takes the batch and clears oldestMs in
// between, the mark is set after the fact with nothing queued, and LagMs then grows without
// bound until some later publication is delivered. It is a scheduling race: this test
// gives it many chances.
func TestLagBackToZero(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "s", clock)
	rp, err := replication.New(replication.Config{Threshold: 0.2, Peers: []replication.Peer{{Region: "b", Addr: b.addr}},
		Secret: "s", Interval: 2 * time.Millisecond, Timeout: time.Second, Logger: quiet}, a.eng)
	if err != nil {
		t.Fatal(err)
	}
	a.repl.Store(rp)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b.eng.MergeComponents([]engine.Component{{Key: engine.AppendKey(nil, tup("k")), Seq: t0 / 60_000, Region: "x", Count: 1}})
	a.eng.MergeComponents([]engine.Component{{Key: engine.AppendKey(nil, tup("k")), Seq: t0 / 60_000, Region: "x", Count: 1}})
	budget := time.Second
	if testing.Short() {
		budget = 300 * time.Millisecond
	}
	end := time.Now().Add(budget)
	var n uint64
	// Each round moves the shared manual clock 1 ms (the lag is measured by it), so a mark
	// left behind shows as a lag; 50,000 rounds stay inside t0's 60 s cell.
	for ; time.Now().Before(end) && n < 50_000; n++ {
		a.count("k", 1<<40, 1) // a foreign count exists: every growth is due
		want := n + 1
		deadline := time.Now().Add(waitFor)
		for b.status("k").CurrentImported != want+1 {
			if time.Now().After(deadline) {
				t.Fatalf("growth %d did not reach B", want)
			}
			time.Sleep(100 * time.Microsecond)
		}
		clock.Advance(1)
		// B has it before the sender has read B's reply and cleared the mark: wait for that
		// as long as for any condition. A mark left behind never clears, since nothing else
		// is published meanwhile.
		deadline = time.Now().Add(waitFor)
		for rp.Stats()[0].LagMs != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("publication %d delivered and nothing queued, yet LagMs is %d and growing: %+v",
					want, rp.Stats()[0].LagMs, rp.Stats()[0])
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	t.Logf("%d publications, lag back to 0 after each", n)
}

// TestLargeAntiEntropyCompletes: anti-entropy sends every live component, in one pipelined
// write read back under one Timeout. Its duration grows with the store, Timeout does not:
// once the exchange takes longer than Timeout (here 16 batches at Timeout/8 each, twice
// Timeout; in production ~1M live cells, ~80 MB, over a WAN link against the 2 s
// default), it fails, and since every reconnection starts with the same anti-entropy, the
// peer never comes up and receives nothing at all, publications included.
//
// Under -race on a loaded 2-core machine every attempt once failed: the fake peer parsed
// each batch with fmt.Sscanf per argument, 262 ms a batch (37 ms with readLength), more
// than the 180 ms a 20 ms reply left of a 200 ms Timeout. Each reply now also leaves 7/8
// of Timeout for the peer's and the sender's work and scheduling.
func TestLargeAntiEntropyCompletes(t *testing.T) {
	const timeout = time.Second
	clock := engine.NewManualClock(t0)
	eng := engine.New(clock, engine.Config{Region: "a", Logger: quiet})
	const n = 16 * replication.MaxBatch
	for i := range n {
		if _, err := eng.Limit(tup(fmt.Sprint("k", i)), 1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	addr := fakePeer(t, timeout/8)
	rp, err := replication.New(replication.Config{Threshold: 0.2, Peers: []replication.Peer{{Region: "b", Addr: addr}},
		Secret: "s", Interval: interval, Timeout: timeout, Logger: quiet}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Completion, not speed, is checked: 2 s of batches, bounded generously.
	deadline := time.Now().Add(30 * time.Second)
	for s := rp.Stats()[0]; !s.Up || s.Syncs < 1; s = rp.Stats()[0] {
		if time.Now().After(deadline) {
			t.Fatalf("anti-entropy of %d components (%d batches of %v, Timeout %v) never completed: %+v",
				n, n/replication.MaxBatch, timeout/8, timeout, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLongKeysReachPeer: many live cells with long keys (the spec allows keys of 1024
// bytes) must still reach the peer. A batch of MaxBatch rows is sized by count, not bytes:
// 2047 rows of ~1 KiB keys make one RL.INTERNAL.PUBLISH of ~2 MiB, beyond the receiver's
// 1 MiB request buffer, so the receiver drops the connection, and every reconnection's
// anti-entropy sends the same oversized batch again.
func TestLongKeysReachPeer(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	b := newRegion(t, "b", "", "s", clock)
	const n = 2100
	pad := strings.Repeat("x", 1000)
	for i := range n {
		a.count(fmt.Sprintf("%s%05d", pad, i), 5, 1) // 1 >= 0.2*5: due at once
	}
	a.replicate(b)
	b.replicate(a)
	deadline := time.Now().Add(waitFor)
	for {
		missing := 0
		for i := range n {
			if b.status(fmt.Sprintf("%s%05d", pad, i)).CurrentImported != 1 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B is missing %d of %d cells of A after %v; A's stats of B: %+v", missing, n, waitFor, a.stats("b"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLagWhilePublicationUndelivered: a peer that accepts the connection and heartbeats
// but fails every publication (here: it drops the connection on RL.INTERNAL.PUBLISH) never
// gets A's publication. LagMs, "the age of the oldest publication not yet delivered",
// must grow; the sender resets it when it takes a batch off the queue, before the
// delivery, so a failed delivery leaves it at 0.
func TestLagWhilePublicationUndelivered(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := newRegion(t, "a", "", "s", clock)
	addr := fakePeer(t, -1)
	a.replicateTo("s", replication.Peer{Region: "b", Addr: addr})
	testwait.UntilTrue(t, waitFor, "A up (nothing to sync yet)", func() bool { return a.stats("b").Up })
	a.count("k", 100, 30)
	testwait.UntilTrue(t, waitFor, "the publication fails", func() bool { return a.stats("b").Failures >= 1 })
	clock.Advance(10 * interval.Milliseconds()) // the lag is measured by the shared manual clock
	if s := a.stats("b"); s.LagMs < 10*interval.Milliseconds() {
		t.Fatalf("publication undelivered for %v, stats %+v: LagMs %d", 10*interval, s, s.LagMs)
	}
}

// fakePeer listens for a peer that answers HELLO and PING with +OK/+PONG. With
// publishDelay < 0 it closes the connection on RL.INTERNAL.PUBLISH; otherwise it answers
// each PUBLISH with [0] after publishDelay (a slow link or a busy receiver). It closes the
// connection on anything else.
func fakePeer(t *testing.T, publishDelay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					args, err := readCommand(br)
					if err != nil {
						return
					}
					switch strings.ToUpper(args[0]) {
					case "RL.INTERNAL.HELLO":
						_, err = io.WriteString(c, "+OK\r\n")
					case "PING":
						_, err = io.WriteString(c, "+PONG\r\n")
					case "RL.INTERNAL.PUBLISH":
						if publishDelay < 0 {
							return
						}
						time.Sleep(publishDelay)
						_, err = io.WriteString(c, "*1\r\n:0\r\n")
					default:
						return
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readCommand reads one RESP array of bulk strings.
func readCommand(br *bufio.Reader) ([]string, error) {
	n, err := readLength(br, '*')
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad header: %d, %w", n, err)
	}
	args := make([]string, n)
	for i := range args {
		l, err := readLength(br, '$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

// TestNewRefusesPeers: New refuses a peer it could never dial or that is not another
// region's, and takes host:port and tls://host:port.
func TestNewRefusesPeers(t *testing.T) {
	eng := engine.New(engine.NewManualClock(t0), engine.Config{Region: "a"})
	tests := []struct {
		peer replication.Peer
		err  string
	}{
		{peer: replication.Peer{Region: "b", Addr: "127.0.0.1:7002"}},
		{peer: replication.Peer{Region: "b", Addr: "tls://127.0.0.1:7002"}},
		{peer: replication.Peer{Region: "b", Addr: "tls://[::1]:7002"}},
		{peer: replication.Peer{Region: "a", Addr: "127.0.0.1:7002"}, err: "not ours"},
		{peer: replication.Peer{Region: "b", Addr: ""}, err: "an address"},
		{peer: replication.Peer{Region: "b", Addr: "tls://127.0.0.1"}, err: "missing port"},
		{peer: replication.Peer{Region: "b", Addr: "https://127.0.0.1:7002"}, err: "want host:port or tls://host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.peer.Region+"="+tt.peer.Addr, func(t *testing.T) {
			_, err := replication.New(replication.Config{Peers: []replication.Peer{tt.peer}, Secret: "s", Logger: quiet}, eng)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("New(%+v) error = %v, want %q", tt.peer, err, tt.err)
			}
		})
	}
}

// readLength reads a RESP header line, kind then a length. (fmt.Sscanf per argument took
// the fake peer 262 ms to parse a batch of MaxBatch rows under -race on a loaded machine,
// longer than the replicator's Timeout for its reply; this takes 37 ms.)
func readLength(br *bufio.Reader, kind byte) (int, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != kind || line[len(line)-2] != '\r' {
		return 0, fmt.Errorf("bad header %q", line)
	}
	n, err := strconv.Atoi(line[1 : len(line)-2])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad header %q", line)
	}
	return n, nil
}
