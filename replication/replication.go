// Package replication moves G-Counter components between the origins of different
// regions (SPEC section 6).
//
// Concurrency: Run starts one publisher goroutine and one sender goroutine per peer. The
// publisher takes this region's components that are due (engine.Publishable) every
// publish interval, jittered, and puts one batch on every peer's bounded queue. Each
// sender owns its peer's connection: it connects, authenticates with the cluster secret,
// pushes every live component it holds (anti-entropy, so a peer that restarted or was cut
// off catches up without new traffic), then writes queued batches pipelined and reads
// their replies. Any failure closes the connection; the sender retries with backoff, and
// the next connection starts with anti-entropy again, which supersedes whatever was queued.
// Receiving is the other side's job: RL.INTERNAL.PUBLISH on its listener.
package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/link"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// Store is what replication needs from the origin's engine.
type Store interface {
	Region() string
	Publishable(threshold float64, limit int) []engine.Component
	Components() []engine.Component
}

// Peer is another region's origin.
type Peer struct {
	Region string
	Addr   string // host:port, or tls://host:port (package link)
}

// Config configures a Replicator.
type Config struct {
	Peers     []Peer
	Secret    string        // the cluster secret
	TLS       *tls.Config   // tls:// peers: roots (nil: the system roots) and client certificate
	Interval  time.Duration // publish interval, jittered by +-20%; default 1s
	Threshold float64       // share of a cell's lowest limit before it is published (0: every count)
	Timeout   time.Duration // dial and per-exchange bound; default 2s
	MaxQueue  int           // batches queued per peer; default 64
	Logger    *slog.Logger
	// Clock times publications (LagMs) and exchanges (LastOKMs, ImportedMs); default the
	// store's clock when it has one (an *engine.Engine does), else the system clock.
	// Network deadlines and the publish interval are real time.
	Clock engine.Clock
}

// MaxBatch is the most components in one RL.INTERNAL.PUBLISH (wire.MaxPublishItems).
const MaxBatch = wire.MaxPublishItems

// Replicator publishes this region's components to its peers.
type Replicator struct {
	cfg   Config
	store Store
	log   *slog.Logger
	peers []*peer
}

type peer struct {
	Peer
	target link.Addr // Addr parsed
	queue  chan batch

	up          atomic.Bool
	lastOKMs    atomic.Int64 // last successful exchange
	oldestMs    atomic.Int64 // enqueue time of the oldest batch not yet delivered; 0 if none
	published   atomic.Uint64
	syncs       atomic.Uint64
	overflowed  atomic.Bool // a batch was dropped: the next round syncs everything
	failures    atomic.Uint64
	lastFailure atomic.Pointer[string]
	imported    atomic.Uint64 // components received from this peer
	importedMs  atomic.Int64  // when the last batch was received
}

type batch struct {
	comps    []engine.Component
	queuedMs int64
}

// New returns a Replicator; Run starts it.
func New(cfg Config, store Store) (*Replicator, error) {
	if cfg.Secret == "" {
		return nil, errors.New("replication: peers need --cluster-secret")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Threshold < 0 { // 0 is valid: publish every count
		cfg.Threshold = 0.2
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = engine.SystemClock{}
		if c, ok := store.(interface{ Clock() engine.Clock }); ok {
			cfg.Clock = c.Clock()
		}
	}
	r := &Replicator{cfg: cfg, store: store, log: cfg.Logger}
	seen := map[string]bool{store.Region(): true}
	for _, p := range cfg.Peers {
		if p.Region == "" || p.Addr == "" || seen[p.Region] {
			return nil, fmt.Errorf("replication: peer %q=%q: each peer needs its own region (not ours) and an address", p.Region, p.Addr)
		}
		target, err := link.ParseAddr(p.Addr)
		if err != nil {
			return nil, fmt.Errorf("replication: peer %q: %w", p.Region, err)
		}
		seen[p.Region] = true
		r.peers = append(r.peers, &peer{Peer: p, target: target, queue: make(chan batch, cfg.MaxQueue)})
	}
	return r, nil
}

// Run publishes and delivers until ctx ends, then makes one bounded attempt to deliver
// what is due (SIGTERM flushes publications).
func (r *Replicator) Run(ctx context.Context) {
	// Senders stop after the final publication has been queued.
	sendCtx, stopSenders := context.WithCancel(context.Background())
	defer stopSenders()
	var wg sync.WaitGroup
	for _, p := range r.peers {
		wg.Add(1)
		go func() { defer wg.Done(); r.send(sendCtx, p) }()
	}
	for {
		jitter := time.Duration(float64(r.cfg.Interval) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			r.publish()
			stopSenders()
			wg.Wait()
			return
		case <-time.After(jitter):
			r.publish()
		}
	}
}

// publish queues this region's due components on every peer.
func (r *Replicator) publish() {
	now := r.cfg.Clock.NowMs()
	for range 64 { // bounded: 64 full batches a round
		comps := r.store.Publishable(r.cfg.Threshold, MaxBatch)
		if len(comps) == 0 {
			return
		}
		for len(comps) > 0 {
			n := min(len(comps), MaxBatch)
			b := batch{comps: comps[:n], queuedMs: now}
			comps = comps[n:]
			for _, p := range r.peers {
				p.oldestMs.CompareAndSwap(0, now) // before the send: the sender clears it after delivery
				select {
				case p.queue <- b:
				default:
					p.overflowed.Store(true) // the sender will sync everything instead
				}
			}
		}
	}
}

// send owns one peer's connection until ctx ends.
func (r *Replicator) send(ctx context.Context, p *peer) {
	var backoff time.Duration
	for {
		err := r.session(ctx, p)
		p.up.Store(false)
		if ctx.Err() != nil {
			return
		}
		p.failures.Add(1)
		msg := err.Error()
		if prev := p.lastFailure.Swap(&msg); prev == nil || *prev != msg {
			r.log.Warn("peer exchange failed", "peer", p.Region, "addr", p.Addr, "error", err)
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// session connects, syncs everything, then delivers queued batches until an error or
// ctx ends (after which it delivers what is queued once more, bounded by Timeout).
func (r *Replicator) session(ctx context.Context, p *peer) error {
	c, err := r.dial(ctx, p)
	if err != nil {
		return err
	}
	defer c.close()
	// Anti-entropy: everything live, which supersedes anything queued so far.
	p.overflowed.Store(false)
	drain(p.queue)
	if err := r.deliver(c, p, r.store.Components(), true); err != nil {
		return err
	}
	p.oldestMs.Store(0)
	if !p.up.Swap(true) {
		r.log.Info("peer connected", "peer", p.Region, "addr", p.Addr)
	}
	// A heartbeat every interval finds a dead connection (a restarted or cut-off peer)
	// even when nothing is published, so that the reconnection's anti-entropy runs.
	heartbeat := time.NewTicker(r.cfg.Interval)
	defer heartbeat.Stop()
	for {
		var b batch
		select {
		case <-ctx.Done():
			return r.flushQueue(c, p)
		case <-heartbeat.C:
			c.buf = resp.AppendCommand(c.buf[:0], "PING")
			if err := c.roundTrips(1, r.cfg.Timeout); err != nil {
				return fmt.Errorf("peer %s: heartbeat: %w", p.Region, err)
			}
			p.lastOKMs.Store(r.cfg.Clock.NowMs())
			continue
		case b = <-p.queue:
		}
		if p.overflowed.Swap(false) {
			drain(p.queue)
			if err := r.deliver(c, p, r.store.Components(), true); err != nil {
				return err
			}
			p.oldestMs.Store(0)
			continue
		}
		comps := b.comps
		for more := true; more; { // take everything queued: one pipelined write
			select {
			case nb := <-p.queue:
				comps = append(comps[:len(comps):len(comps)], nb.comps...)
			default:
				more = false
			}
		}
		if err := r.deliver(c, p, comps, false); err != nil {
			return err
		}
		if len(p.queue) == 0 {
			p.oldestMs.Store(0)
		}
	}
}

func (r *Replicator) flushQueue(c *conn, p *peer) error {
	var comps []engine.Component
	for more := true; more; {
		select {
		case b := <-p.queue:
			comps = append(comps, b.comps...)
		default:
			more = false
		}
	}
	if len(comps) == 0 {
		return nil
	}
	return r.deliver(c, p, comps, false)
}

// deliver sends comps in batches of MaxBatch, pipelined, and reads every reply.
func (r *Replicator) deliver(c *conn, p *peer, comps []engine.Component, sync bool) error {
	if err := c.publish(comps, r.cfg.Timeout); err != nil {
		return fmt.Errorf("peer %s: %w", p.Region, err)
	}
	p.lastOKMs.Store(r.cfg.Clock.NowMs())
	if sync {
		p.syncs.Add(1)
	} else {
		p.published.Add(uint64(len(comps)))
	}
	return nil
}

func drain(q chan batch) {
	for {
		select {
		case <-q:
		default:
			return
		}
	}
}

// Received records a batch of rows components received from region (the receiving side
// is RL.INTERNAL.PUBLISH on this node's listener).
func (r *Replicator) Received(region string, rows int) {
	for _, p := range r.peers {
		if p.Region == region {
			p.imported.Add(uint64(rows))
			p.importedMs.Store(r.cfg.Clock.NowMs())
		}
	}
}

// PeerStats describes one peer.
type PeerStats struct {
	Region     string
	Addr       string
	Up         bool
	LastOKMs   int64  // last successful exchange (unix ms); 0 before any
	LagMs      int64  // age of the oldest publication not yet delivered; 0 when none waits
	Published  uint64 // components delivered by publication (anti-entropy not counted)
	Syncs      uint64 // anti-entropy exchanges completed
	Failures   uint64
	Imported   uint64 // components received from the peer
	ImportedMs int64  // when the last batch was received (unix ms)
}

// Stats returns every peer's state.
func (r *Replicator) Stats() []PeerStats {
	now := r.cfg.Clock.NowMs()
	out := make([]PeerStats, 0, len(r.peers))
	for _, p := range r.peers {
		s := PeerStats{Region: p.Region, Addr: p.Addr, Up: p.up.Load(), LastOKMs: p.lastOKMs.Load(),
			Published: p.published.Load(), Syncs: p.syncs.Load(), Failures: p.failures.Load(),
			Imported: p.imported.Load(), ImportedMs: p.importedMs.Load()}
		if o := p.oldestMs.Load(); o > 0 {
			s.LagMs = now - o
		}
		out = append(out, s)
	}
	return out
}

// conn is one connection to a peer, used by its sender goroutine only.
type conn struct {
	nc  net.Conn
	rd  *resp.ReplyReader
	buf []byte
}

// dial connects to p (over TLS for a tls:// address) and says HELLO with the cluster
// secret.
func (r *Replicator) dial(ctx context.Context, p *peer) (*conn, error) {
	d := link.Dialer{TLS: r.cfg.TLS, Net: net.Dialer{Timeout: r.cfg.Timeout, KeepAlive: 5 * time.Second}}
	nc, err := d.Dial(ctx, p.target)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", p.Addr, err)
	}
	c := &conn{nc: nc, rd: resp.NewReplyReader(nc, 1)}
	c.buf = wire.AppendHello(c.buf[:0], r.cfg.Secret, wire.PeerRun(r.store.Region()))
	if err := c.roundTrips(1, r.cfg.Timeout); err != nil {
		nc.Close()
		return nil, fmt.Errorf("hello %s: %w", p.Addr, err)
	}
	return c, nil
}

func (c *conn) close() { _ = c.nc.Close() }

// maxBatchBytes bounds one RL.INTERNAL.PUBLISH, well under the receiver's 1 MiB buffer
// for one request (keys may be 1 KiB each).
const maxBatchBytes = 512 << 10

// publishWindow is how many batches are written before their replies are read: enough to
// keep a long link busy, few enough that each window finishes within the timeout.
const publishWindow = 4

// publish writes comps as RL.INTERNAL.PUBLISH commands of at most MaxBatch rows and
// maxBatchBytes, pipelined publishWindow at a time, each window with its own deadline, and
// reads their replies.
func (c *conn) publish(comps []engine.Component, timeout time.Duration) error {
	for len(comps) > 0 {
		c.buf = c.buf[:0]
		n := 0
		for n < publishWindow && len(comps) > 0 {
			rows, size := 0, 0
			for rows < len(comps) && rows < MaxBatch && size < maxBatchBytes {
				size += len(comps[rows].Key) + len(comps[rows].Region) + 64
				rows++
			}
			part := comps[:rows]
			comps = comps[rows:]
			c.buf = wire.AppendPublish(c.buf, part)
			n++
		}
		if err := c.roundTrips(n, timeout); err != nil {
			return err
		}
	}
	return nil
}

// roundTrips writes c.buf and reads n replies, each +OK or an integer array.
func (c *conn) roundTrips(n int, timeout time.Duration) error {
	if err := c.nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.nc.Write(c.buf); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var ints [1]int64
	for range n {
		// Each reply gets the whole timeout: a window of large batches on a slow link is
		// slow, not dead.
		if err := c.nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		rep, err := c.rd.Read(ints[:0])
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if rep.Kind == resp.ErrorReply {
			return fmt.Errorf("peer refused: %s", rep.Text)
		}
	}
	return nil
}
