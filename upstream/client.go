// Package upstream is the node-to-node client: an edge's to one origin (a Client
// implements engine.Origin), and an origin's to another region's (Publish and Ping, for
// package replication). It speaks the internal protocol (docs/internal-protocol.md): one TCP
// connection (TLS for a tls:// address, package link), authenticated with
// RL.INTERNAL.HELLO, on which every call is pipelined.
//
// The client never retries: a call that fails returns its error, and the engine decides
// when to try again. The next call after a connection failure dials anew.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/link"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// Defaults of Config.
const (
	DefaultDialTimeout = 200 * time.Millisecond
	// DefaultTLSDialTimeout is the default for a tls:// origin: the handshake adds a round
	// trip or two to the connect, so 200ms would shut out an origin more than about
	// 60 ms away.
	DefaultTLSDialTimeout = time.Second
	DefaultMaxInFlight    = 4096
)

// Bounds of one call, so that no request the client sends is one the origin must refuse
// with a protocol error (which would close the connection under every pipelined call). An
// origin parses requests with resp.DefaultLimits: at most wire.MaxArgs arguments, each at
// most MaxBulk bytes, and at most MaxBuffer bytes per request.
const (
	// MaxReadItems is the most items of one Read: RL.INTERNAL.READ has 1+4n arguments.
	MaxReadItems = wire.MaxReadItems
	// MaxReplayItems is the most items of one Replay: RL.INTERNAL.REPLAY has 3+6n arguments.
	MaxReplayItems = wire.MaxReplayItems
	// MaxForwardArgs is the most arguments of one Forward's payload.
	MaxForwardArgs = wire.MaxForwardArgs
	// MaxRequestBytes bounds the encoding of one request.
	MaxRequestBytes = 1 << 20
	// maxKeyBytes bounds one key (one bulk string).
	maxKeyBytes = 512 << 10
	// MaxPublishItems is the most components in one RL.INTERNAL.PUBLISH.
	MaxPublishItems = wire.MaxPublishItems
	// maxPublishBytes bounds one RL.INTERNAL.PUBLISH, well under the receiver's 1 MiB
	// buffer for one request (keys may be 1 KiB each).
	maxPublishBytes = 512 << 10
	// publishWindow is how many publications are written before their replies are
	// awaited: enough to keep a long link busy, few enough that each reply comes within
	// ReplyTimeout.
	publishWindow = 4
	// maxReplyInts bounds the integers of one reply.
	maxReplyInts = wire.MaxReplyInts
)

// authRetryAfter is how long calls fail at once with the origin's refusal of the cluster
// secret before the client tries HELLO again: a wrong secret is a configuration error, and
// redialling it on every call would only load the origin.
const authRetryAfter = time.Second

var (
	// ErrClosed is returned by calls on a closed Client, and to calls pending at Close.
	ErrClosed = errors.New("upstream: client closed")
	// ErrTooManyInFlight is returned at once when Config.MaxInFlight calls are in flight.
	ErrTooManyInFlight = errors.New("upstream: too many requests in flight")
	// ErrAuth is returned when the origin refuses the cluster secret (-WRONGPASS), or this
	// node's link (-NOPERM: a client certificate it requires, --cluster-client-ca).
	ErrAuth = errors.New("upstream: origin refused the cluster secret")
	// ErrTooLarge is returned, without sending anything, for a call beyond MaxReadItems,
	// MaxReplayItems, MaxForwardArgs or MaxRequestBytes; the caller splits it.
	ErrTooLarge = errors.New("upstream: request too large")
	// ErrEmpty is returned, without sending anything, for a Replay of no items.
	ErrEmpty = errors.New("upstream: request has no items")
)

// ServerError is an error reply of the origin to one call ("ERR ..."). It concerns that
// call only: the connection stays up.
type ServerError struct {
	Msg string // the reply, code first ("ERR internal: malformed tuple key")
}

// Error returns the origin's reply.
func (e *ServerError) Error() string { return "origin replied: " + e.Msg }

// ServerMessage returns the origin's reply as it was, for a node that passes it on to its
// client.
func (e *ServerError) ServerMessage() string { return e.Msg }

// Config configures a Client.
type Config struct {
	Addr    string // the origin's RESP address, host:port or tls://host:port
	Secret  string // the cluster secret, sent in RL.INTERNAL.HELLO
	NodeRun string // this edge run, "node-id/boot-nonce", sent in RL.INTERNAL.HELLO

	// TLS configures a tls:// Addr (link.Dialer): the roots the origin's certificate is
	// verified against (nil: the system roots) and the client certificate, if any.
	TLS *tls.Config
	// DialTimeout bounds the TCP connect with the TLS handshake and, again, the HELLO
	// exchange. Default 200ms; 1s for a tls:// Addr.
	DialTimeout time.Duration
	// MaxInFlight bounds the calls admitted and not yet answered, including calls whose
	// caller gave up but whose reply has not arrived. Beyond it calls fail at once with
	// ErrTooManyInFlight. Default 4096.
	MaxInFlight int
	// ReplyTimeout bounds the wait for each reply while requests are outstanding, and
	// WriteTimeout each write; beyond either the connection fails. Defaults 5s and 10s.
	ReplyTimeout, WriteTimeout time.Duration
	// Role names the far node in logs: "origin" (default) or "peer".
	Role string
	// Logger receives connection state changes only. Nil: slog.Default().
	Logger *slog.Logger
}

// Client is a connection to one origin; it implements engine.Origin. It is safe for
// concurrent use. It dials lazily, on the first call, and again on the first call after
// the connection failed.
//
// Who owns what:
//   - Client.mu guards closed, cur, dialing and the dial-failure state. Lock order:
//     Client.mu may be taken while holding nothing else, or after conn.mu was released;
//     never conn.mu inside Client.mu.
//   - The dial goroutine (at most one at a time, c.dialing) owns the new net.Conn until it
//     publishes the conn in c.cur and starts its two goroutines.
//   - A caller encodes its request onto conn.out and pushes its call onto conn.pending in
//     one critical section of conn.mu, so the pending FIFO is in wire order.
//   - The conn's writer goroutine alone writes the net.Conn; it swaps conn.out for its
//     spare buffer under conn.mu and writes outside it. The conn's reader goroutine alone
//     reads the net.Conn, and pops the head of conn.pending for each reply.
//   - A call's result fields are written by whoever pops it from conn.pending (the reader,
//     or conn.fail, which empties the FIFO) and are published by the send on call.done; the
//     caller reads them only after receiving from done. A caller whose ctx ends leaves
//     without receiving; its call is then never reused.
//   - inflight counts calls from admission until they are popped (or refused before being
//     queued); popping, not the caller leaving, frees the slot.
type Client struct {
	addr, secret, nodeRun string
	target                link.Addr // addr parsed; a dial fails with addrErr when it does not parse
	addrErr               error
	tlsCfg                *tls.Config
	dialTimeout           time.Duration
	writeTimeout          time.Duration // Config.WriteTimeout; tests shorten it
	replyTimeout          time.Duration // Config.ReplyTimeout; tests shorten it
	maxInFlight           int64
	role                  string // Config.Role, for logs
	log                   *slog.Logger

	life     context.Context // ended by Close; aborts a dial in progress
	stop     context.CancelFunc
	inflight atomic.Int64
	writes   atomic.Uint64 // writes to the connection, for tests of coalescing
	conns    atomic.Uint64 // connections established
	calls    sync.Pool     // of *call

	mu        sync.Mutex
	closed    bool
	cur       *conn          // the live connection, nil when none
	dialing   *dialState     // the dial in progress, nil when none
	failKind  string         // kind of the last dial failure logged; "" once connected
	authErr   error          // the origin's refusal of the secret, while it holds
	authUntil time.Time      // when authErr stops holding
	wg        sync.WaitGroup // dial, reader and writer goroutines
}

// dialState is one dial; done is closed once conn or err are set.
type dialState struct {
	done chan struct{}
	conn *conn
	err  error
}

// New returns a Client of the origin at cfg.Addr. It does not dial.
func New(cfg Config) *Client {
	target, addrErr := link.ParseAddr(cfg.Addr)
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
		if target.TLS {
			cfg.DialTimeout = DefaultTLSDialTimeout
		}
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReplyTimeout <= 0 {
		cfg.ReplyTimeout = replyTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = writeTimeout
	}
	if cfg.Role == "" {
		cfg.Role = "origin"
	}
	life, stop := context.WithCancel(context.Background())
	c := &Client{
		addr: cfg.Addr, secret: cfg.Secret, nodeRun: cfg.NodeRun, target: target, addrErr: addrErr, tlsCfg: cfg.TLS,
		dialTimeout: cfg.DialTimeout, writeTimeout: cfg.WriteTimeout, replyTimeout: cfg.ReplyTimeout, maxInFlight: int64(cfg.MaxInFlight),
		role: cfg.Role, log: cfg.Logger.With(cfg.Role, cfg.Addr),
		life: life, stop: stop,
	}
	c.calls.New = func() any { return &call{done: make(chan struct{}, 1)} }
	return c
}

// Addr returns the origin's address.
func (c *Client) Addr() string { return c.addr }

// AuthRefused reports whether the origin refused the cluster secret at the last dial.
func (c *Client) AuthRefused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authErr != nil
}

// Close closes the connection, fails pending calls with ErrClosed, and waits for the
// client's goroutines to end. Calls after Close fail with ErrClosed. It returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait() // nothing is added to wg once closed
		return nil
	}
	c.closed = true
	cn := c.cur
	c.mu.Unlock()
	c.stop()
	if cn != nil {
		cn.fail(ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// Read reads cells Seq and Seq-1 of each item's tuple: RL.INTERNAL.READ key seq ....
// The result has one CellCounts per item, in order. At most MaxReadItems items. items is
// not retained.
func (c *Client) Read(ctx context.Context, items []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	if len(items) > MaxReadItems { // no items is a heartbeat: it only gets the meta
		return nil, engine.OriginMeta{}, c.wrap("read", ErrTooLarge)
	}
	out := make([]engine.CellCounts, len(items))
	for i, it := range items {
		if len(it.Key) > maxKeyBytes {
			return nil, engine.OriginMeta{}, c.wrap("read", ErrTooLarge)
		}
		out[i].Seq = it.Seq
	}
	cl := c.getCall(opRead)
	cl.counts = out
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendRead(b, items) })
	if err != nil {
		return nil, engine.OriginMeta{}, c.wrap("read", err)
	}
	meta := cl.meta
	c.putCall(cl)
	return out, meta, nil
}

// Replay delivers a batch of accepted cost: RL.INTERNAL.REPLAY batch-id boot key seq cost ....
// The result is the counts after applying, one per item. b.Node is not sent: the origin
// knows this run from HELLO (Config.NodeRun). At most MaxReplayItems items. b is not
// retained: a retry re-sends the same batch with a new call.
func (c *Client) Replay(ctx context.Context, b engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	if err := checkItems(len(b.Items), MaxReplayItems); err != nil {
		return nil, engine.OriginMeta{}, c.wrap("replay", err)
	}
	out := make([]engine.CellCounts, len(b.Items))
	for i, it := range b.Items {
		if len(it.Key) > maxKeyBytes {
			return nil, engine.OriginMeta{}, c.wrap("replay", ErrTooLarge)
		}
		out[i].Seq = it.Seq
	}
	cl := c.getCall(opReplay)
	cl.counts = out
	err := c.roundTrip(ctx, cl, func(buf []byte) []byte { return wire.AppendReplay(buf, b) })
	if err != nil {
		return nil, engine.OriginMeta{}, c.wrap("replay", err)
	}
	meta := cl.meta
	c.putCall(cl)
	return out, meta, nil
}

// Decide hands one decision to the origin, which decides and counts atomically:
// RL.INTERNAL.DECIDE key limit cost extra. It returns the decision and the tuple's counts
// after it.
func (c *Client) Decide(ctx context.Context, r engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	if len(r.Key) > maxKeyBytes {
		return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, c.wrap("decide", ErrTooLarge)
	}
	cl := c.getCall(opDecide)
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendDecide(b, r) })
	if err != nil {
		return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, c.wrap("decide", err)
	}
	d, cc, meta := cl.dec, cl.cc, cl.meta
	c.putCall(cl)
	return d, cc, meta, nil
}

// DecideMulti hands a multi-limit decision to the origin, which decides it at one instant
// and counts it in all its tuples or none (RL.INTERNAL.DECIDEMULTI). It returns each item's
// decision and counts after it, in the request's order.
func (c *Client) DecideMulti(ctx context.Context, r engine.DecideMultiRequest) ([]engine.Decision, []engine.CellCounts, engine.OriginMeta, error) {
	if len(r.Items) == 0 || len(r.Items) > engine.MaxLimits {
		return nil, nil, engine.OriginMeta{}, c.wrap("decide", ErrTooLarge)
	}
	for _, it := range r.Items {
		if len(it.Key) > maxKeyBytes {
			return nil, nil, engine.OriginMeta{}, c.wrap("decide", ErrTooLarge)
		}
	}
	cl := c.getCall(opDecideMulti)
	ds, ccs := make([]engine.Decision, len(r.Items)), make([]engine.CellCounts, len(r.Items))
	cl.decs, cl.counts = ds, ccs
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendDecideMulti(b, r) })
	if err != nil {
		return nil, nil, engine.OriginMeta{}, c.wrap("decide", err)
	}
	meta := cl.meta
	c.putCall(cl)
	return ds, ccs, meta, nil
}

// Forward has the origin run a command for one of the edge's clients (RL.INTERNAL.FORWARD
// proto workspace arg...): a command whose state only the origin holds (the counter
// keyspace, CL.THROTTLE, the limiter scripts). The result is the command's reply, encoded
// in RESP proto, to be written to the client as it is; an error reply of the command is
// in it too. The error is for the call: the origin unreachable, or refusing the call. args
// is the payload of wire.AppendForwardCmd, at most MaxForwardArgs arguments.
func (c *Client) Forward(ctx context.Context, proto int, ws string, args [][]byte) ([]byte, error) {
	if len(args) > MaxForwardArgs {
		return nil, c.wrap("forward", ErrTooLarge)
	}
	cl := c.getCall(opForward)
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendForward(b, proto, ws, args) })
	if err != nil {
		return nil, c.wrap("forward", err)
	}
	raw := cl.raw
	c.putCall(cl)
	return raw, nil
}

// Changes asks for the origin's changes after version since (RL.INTERNAL.CHANGES,
// engine/changes.go).
func (c *Client) Changes(ctx context.Context, since uint64) (engine.ChangesReply, error) {
	cl := c.getCall(opChanges)
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendChanges(b, since) })
	if err != nil {
		return engine.ChangesReply{}, c.wrap("changes", err)
	}
	r := cl.chg
	cl.chg = engine.ChangesReply{}
	c.putCall(cl)
	return r, nil
}

// Reset has the origin reset tuples (RL.INTERNAL.RESET key ...): keys made by
// engine.AppendKey, 1 to wire.MaxResetKeys of them. It returns how many held usage.
func (c *Client) Reset(ctx context.Context, keys [][]byte) (int, error) {
	if err := checkItems(len(keys), wire.MaxResetKeys); err != nil {
		return 0, c.wrap("reset", err)
	}
	for _, k := range keys {
		if len(k) > maxKeyBytes {
			return 0, c.wrap("reset", ErrTooLarge)
		}
	}
	cl := c.getCall(opReset)
	cl.n = len(keys)
	if err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendReset(b, keys) }); err != nil {
		return 0, c.wrap("reset", err)
	}
	n := cl.n
	c.putCall(cl)
	return n, nil
}

// Connect dials and says HELLO unless the connection is up, or returns why it cannot.
func (c *Client) Connect(ctx context.Context) error {
	if _, err := c.connect(ctx); err != nil {
		return c.wrap("connect", err)
	}
	return nil
}

// Connections returns how many connections the client has established: a caller that
// must know its calls went over one connection (replication's anti-entropy, which a new
// connection must repeat) compares it before and after.
func (c *Client) Connections() uint64 { return c.conns.Load() }

// Ping sends PING and waits for the reply: a heartbeat that finds a dead connection.
func (c *Client) Ping(ctx context.Context) error {
	cl := c.getCall(opPing)
	if err := c.roundTrip(ctx, cl, func(b []byte) []byte { return resp.AppendCommand(b, "PING") }); err != nil {
		return c.wrap("ping", err)
	}
	c.putCall(cl)
	return nil
}

// Publish sends a peer origin comps as RL.INTERNAL.PUBLISH commands of at most
// MaxPublishItems rows and maxPublishBytes, pipelined publishWindow at a time, and waits
// for every reply. Each reply has ReplyTimeout: a window of large batches on a slow link
// is slow, not dead.
func (c *Client) Publish(ctx context.Context, comps []engine.Component) error {
	var window [publishWindow]*call
	for len(comps) > 0 {
		n := 0
		for n < publishWindow && len(comps) > 0 {
			rows, size := 0, 0
			for rows < len(comps) && rows < MaxPublishItems && size < maxPublishBytes {
				size += len(comps[rows].Key) + len(comps[rows].Region) + 64
				rows++
			}
			part := comps[:rows]
			comps = comps[rows:]
			cl := c.getCall(opPublish)
			if err := c.start(ctx, cl, func(b []byte) []byte { return wire.AppendPublish(b, part) }); err != nil {
				return c.wrap("publish", err) // calls started before are left to the reader
			}
			window[n] = cl
			n++
		}
		for i := range n {
			if err := c.wait(ctx, window[i]); err != nil {
				return c.wrap("publish", err)
			}
			c.putCall(window[i])
		}
	}
	return nil
}

func checkItems(n, limit int) error {
	switch {
	case n == 0:
		return ErrEmpty
	case n > limit:
		return ErrTooLarge
	}
	return nil
}

func (c *Client) wrap(op string, err error) error {
	return fmt.Errorf("upstream %s: %s: %w", c.addr, op, err)
}

func (c *Client) getCall(op opKind) *call {
	cl := c.calls.Get().(*call)
	cl.op = op
	return cl
}

// putCall recycles a call whose done was received. A call left by its caller is not.
func (c *Client) putCall(cl *call) {
	*cl = call{done: cl.done}
	c.calls.Put(cl)
}

// roundTrip admits cl, queues its request on the connection (dialing if need be) and
// waits for the reply or ctx. On a nil error, cl holds the reply's results. When the
// call failed after it was completed (an error reply, a connection failure), it is
// recycled here.
func (c *Client) roundTrip(ctx context.Context, cl *call, enc func([]byte) []byte) error {
	if err := c.start(ctx, cl, enc); err != nil {
		return err
	}
	return c.wait(ctx, cl)
}

// start admits cl and queues its request on the connection, dialing if need be.
func (c *Client) start(ctx context.Context, cl *call, enc func([]byte) []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.inflight.Add(1) > c.maxInFlight {
		c.inflight.Add(-1)
		return ErrTooManyInFlight
	}
	cn, err := c.connect(ctx)
	if err == nil {
		err = cn.enqueue(cl, enc)
	}
	if err != nil {
		c.inflight.Add(-1)
	}
	return err
}

// wait waits for the reply to a started call, or ctx.
func (c *Client) wait(ctx context.Context, cl *call) error {
	select {
	case <-cl.done:
		if err := cl.err; err != nil {
			c.putCall(cl)
			return err
		}
		return nil
	case <-ctx.Done():
		// The call stays in the FIFO; the reader discards its reply when it comes.
		return ctx.Err()
	}
}

// complete ends a popped call with err (nil: the results or a ServerError are in cl).
func (c *Client) complete(cl *call, err error) {
	if err != nil {
		cl.err = err
	}
	c.inflight.Add(-1)
	cl.done <- struct{}{}
}

// connect returns the live connection, or waits for a dial (starting one if none is in
// progress) until it ends or ctx does.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case c.cur != nil:
		cn := c.cur
		c.mu.Unlock()
		return cn, nil
	case c.authErr != nil && time.Now().Before(c.authUntil):
		err := c.authErr
		c.mu.Unlock()
		return nil, err
	}
	d := c.dialing
	if d == nil {
		d = &dialState{done: make(chan struct{})}
		c.dialing = d
		c.wg.Add(1)
		go c.dial(d)
	}
	c.mu.Unlock()
	select {
	case <-d.done:
		return d.conn, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial is the dial goroutine: it connects, says HELLO, and publishes the connection.
func (c *Client) dial(d *dialState) {
	defer c.wg.Done()
	nc, rr, err := c.handshake()
	var cn *conn
	c.mu.Lock()
	c.dialing = nil
	if err == nil && c.closed {
		_ = nc.Close()
		err = ErrClosed
	}
	kind := ""
	switch {
	case err == nil:
		cn = newConn(c, nc, rr)
		c.cur = cn
		c.conns.Add(1)
		c.authErr = nil
		c.wg.Add(2)
		go cn.readLoop()
		go cn.writeLoop()
	case errors.Is(err, ErrClosed):
	case errors.Is(err, ErrAuth):
		kind = "auth"
		c.authErr, c.authUntil = err, time.Now().Add(authRetryAfter)
	default:
		kind = "unreachable"
	}
	prevKind := c.failKind
	if !errors.Is(err, ErrClosed) {
		c.failKind = kind
	}
	c.mu.Unlock()

	switch {
	case err == nil:
		c.log.Info("connected to " + c.role)
	case kind == prevKind || kind == "":
	case kind == "auth":
		c.log.Error(c.role+" refused the cluster secret", "error", err)
	default:
		c.log.Warn("cannot connect to "+c.role, "error", err)
	}
	d.conn, d.err = cn, err
	close(d.done)
}

// handshake dials and authenticates. Close aborts it.
func (c *Client) handshake() (net.Conn, *resp.ReplyReader, error) {
	if c.addrErr != nil {
		return nil, nil, c.addrErr
	}
	// Keep-alive probes detect an origin host that vanished without closing the connection.
	dialer := link.Dialer{TLS: c.tlsCfg, Net: net.Dialer{Timeout: c.dialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 3}}}
	nc, err := dialer.Dial(c.life, c.target)
	if err != nil {
		if c.life.Err() != nil {
			return nil, nil, ErrClosed
		}
		return nil, nil, err
	}
	abort := context.AfterFunc(c.life, func() { _ = nc.Close() })
	rr, err := c.hello(nc)
	if !abort() {
		err = ErrClosed // Close ran during the exchange and closed nc
	}
	if err != nil {
		_ = nc.Close()
		return nil, nil, err
	}
	return nc, rr, nil
}

func (c *Client) hello(nc net.Conn) (*resp.ReplyReader, error) {
	if err := nc.SetDeadline(time.Now().Add(c.dialTimeout)); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if _, err := nc.Write(wire.AppendHello(nil, c.secret, c.nodeRun)); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	rr := resp.NewReplyReader(nc, maxReplyInts)
	rep, err := rr.Read(nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("hello: %w", err)
	case rep.Kind == resp.ErrorReply && (hasCode(rep.Text, "WRONGPASS") || hasCode(rep.Text, "NOPERM")):
		return nil, fmt.Errorf("%w: %s", ErrAuth, rep.Text)
	case rep.Kind == resp.ErrorReply:
		return nil, fmt.Errorf("hello: %w", &ServerError{Msg: string(rep.Text)})
	case rep.Kind != resp.SimpleReply || string(rep.Text) != "OK":
		return nil, fmt.Errorf("hello: %w", errProto("unexpected reply"))
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	return rr, nil
}

// hasCode reports whether an error reply starts with code.
func hasCode(msg []byte, code string) bool {
	return len(msg) >= len(code) && string(msg[:len(code)]) == code &&
		(len(msg) == len(code) || msg[len(code)] == ' ')
}

// PushOverrides sends a peer origin override records (RL.INTERNAL.OVERRIDES) in requests
// of at most wire.MaxOverrideItems records and maxPublishBytes, one after the other, and
// waits for each reply.
func (c *Client) PushOverrides(ctx context.Context, recs []engine.OverrideRecord) error {
	for len(recs) > 0 {
		rows, size := 0, 0
		for rows < len(recs) && rows < wire.MaxOverrideItems && size < maxPublishBytes {
			size += len(recs[rows].Key) + len(recs[rows].Region) + 96
			rows++
		}
		part := recs[:rows]
		recs = recs[rows:]
		cl := c.getCall(opPublish) // its reply is PUBLISH's: [changed]
		if err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendOverrides(b, part) }); err != nil {
			return c.wrap("overrides", err)
		}
		c.putCall(cl)
	}
	return nil
}

// OverrideList reads the origin's overrides after sequence after (RL.INTERNAL.OVERRIDELIST,
// engine.OverridesOrigin); its reply has the CHANGES reply's form.
func (c *Client) OverrideList(ctx context.Context, after uint64) (engine.ChangesReply, error) {
	cl := c.getCall(opChanges)
	err := c.roundTrip(ctx, cl, func(b []byte) []byte { return wire.AppendOverrideList(b, after) })
	if err != nil {
		return engine.ChangesReply{}, c.wrap("override list", err)
	}
	r := cl.chg
	cl.chg = engine.ChangesReply{}
	c.putCall(cl)
	return r, nil
}
