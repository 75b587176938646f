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
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/link"
	"github.com/ratchet/ratchet/upstream"
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
const MaxBatch = upstream.MaxPublishItems

// Replicator publishes this region's components to its peers.
type Replicator struct {
	cfg   Config
	store Store
	log   *slog.Logger
	peers []*peer

	overrides *engine.Overrides // the store's RL.OVERRIDE table, when it has one (overrides.go)
}

type peer struct {
	Peer
	queue chan batch

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

	overridesSeq uint64 // the override changes delivered in this session (owned by the sender)
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
	if o, ok := store.(overrideStore); ok {
		r.overrides = o.Overrides()
	}
	seen := map[string]bool{store.Region(): true}
	for _, p := range cfg.Peers {
		if p.Region == "" || p.Addr == "" || seen[p.Region] {
			return nil, fmt.Errorf("replication: peer %q=%q: each peer needs its own region (not ours) and an address", p.Region, p.Addr)
		}
		if _, err := link.ParseAddr(p.Addr); err != nil {
			return nil, fmt.Errorf("replication: peer %q: %w", p.Region, err)
		}
		seen[p.Region] = true
		r.peers = append(r.peers, &peer{Peer: p, queue: make(chan batch, cfg.MaxQueue)})
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

// send owns one peer's connection until ctx ends. The connection is an upstream.Client
// (the edge's client of its origin): TLS, HELLO with the cluster secret as the peer run
// (wire.PeerRun), and Timeout for the dial, the HELLO, each write and each reply.
func (r *Replicator) send(ctx context.Context, p *peer) {
	c := upstream.New(upstream.Config{Addr: p.Addr, Secret: r.cfg.Secret, NodeRun: wire.PeerRun(r.store.Region()),
		TLS: r.cfg.TLS, DialTimeout: r.cfg.Timeout, ReplyTimeout: r.cfg.Timeout, WriteTimeout: r.cfg.Timeout,
		Role: "peer", Logger: r.log.With("peer_region", p.Region)})
	defer c.Close()
	var backoff time.Duration
	for {
		err := r.session(ctx, c, p)
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
// ctx ends (after which it delivers what is queued once more, bounded by Timeout). Only
// the connect follows ctx; an exchange started is bounded by Timeout per reply.
func (r *Replicator) session(ctx context.Context, c *upstream.Client, p *peer) error {
	if err := c.Connect(ctx); err != nil {
		return err
	}
	// Every exchange of the session must go over this connection: one dialled anew (the
	// peer may have restarted) must start with anti-entropy, in a new session.
	conn := c.Connections()
	same := func(err error) error {
		if err == nil && c.Connections() != conn {
			err = errors.New("connection replaced")
		}
		return err
	}
	// Anti-entropy: everything live, which supersedes anything queued so far.
	p.overflowed.Store(false)
	drain(p.queue)
	if err := r.deliver(c, same, p, r.store.Components(), true); err != nil {
		return err
	}
	p.overridesSeq = 0 // every override too
	if err := r.pushOverrides(c, same, p); err != nil {
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
			return r.flushQueue(c, same, p)
		case <-heartbeat.C:
			if err := same(c.Ping(context.Background())); err != nil {
				return fmt.Errorf("peer %s: heartbeat: %w", p.Region, err)
			}
			p.lastOKMs.Store(r.cfg.Clock.NowMs())
			if err := r.pushOverrides(c, same, p); err != nil {
				return err
			}
			continue
		case b = <-p.queue:
		}
		if p.overflowed.Swap(false) {
			drain(p.queue)
			if err := r.deliver(c, same, p, r.store.Components(), true); err != nil {
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
		if err := r.deliver(c, same, p, comps, false); err != nil {
			return err
		}
		if err := r.pushOverrides(c, same, p); err != nil {
			return err
		}
		if len(p.queue) == 0 {
			p.oldestMs.Store(0)
		}
	}
}

func (r *Replicator) flushQueue(c *upstream.Client, same func(error) error, p *peer) error {
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
	return r.deliver(c, same, p, comps, false)
}

// deliver sends comps in batches of MaxBatch, pipelined, and reads every reply; same
// fails it when the session's connection was replaced meanwhile.
func (r *Replicator) deliver(c *upstream.Client, same func(error) error, p *peer, comps []engine.Component, sync bool) error {
	if err := same(c.Publish(context.Background(), comps)); err != nil {
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
