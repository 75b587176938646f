// Package server accepts RESP connections and feeds their requests to a Handler.
//
// Concurrency: one goroutine accepts. A connection is owned either by an event loop
// (loop_linux.go, Config.EventLoops) or by a goroutine of its own (serveConn: TLS and
// EventLoops 0); a loop serves a request that must wait, and the rest of its batch, from
// a goroutine while the socket stays with the loop (serveAside). Its owner reads whatever
// has arrived, parses every complete request with the bounded parser of package resp,
// serves them in order, and answers the whole batch with one write (a very large batch of
// replies is written in parts). The server's mutex guards only the set of open connections
// and is never held while serving a request.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/resp"
)

// Config configures a Server.
type Config struct {
	Addr         string
	MaxClients   int
	WriteTimeout time.Duration // a client that does not read its replies for this long is dropped
	Limits       resp.Limits
	TLS          *tls.Config // nil: plain TCP
	Logger       *slog.Logger
	// EventLoops > 0 serves plain TCP connections from that many epoll event loops
	// (Linux) instead of a goroutine per connection. The Handler must not wait on a
	// connection whose Conn has NoWait set: it sets WouldBlock instead, and that request
	// is served once more from a goroutine, with NoWait off (a request that waited on
	// the loop would stall all its connections).
	EventLoops int
	// ReadTimeout closes a connection whose incomplete request made no progress (no byte
	// read) for this long; 0 disables.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection idle (no request) this long: Redis's timeout; 0: never.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds a TLS handshake; 0: 5 s.
	HandshakeTimeout time.Duration
	// MaxQueryBuffer bounds request bytes buffered across all connections; past it the
	// connection holding the most is closed. 0: 64 MiB.
	MaxQueryBuffer int64
	// PushLimit bounds the bytes pushed to a connection (pub/sub messages, invalidations)
	// that its client has not taken yet; past it the connection is closed, as Redis's
	// client-output-buffer-limit pubsub hard limit. 0: 32 MiB. PushSoftLimit, when set,
	// closes it once past that many for PushSoftFor (Redis's soft limit).
	PushLimit     int
	PushSoftLimit int
	PushSoftFor   time.Duration
}

const (
	initialBuffer = 16 << 10
	flushAt       = 256 << 10 // write replies early once this many are buffered
)

// Server is a RESP listener.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler Handler

	ln        net.Listener
	port      int
	nextID    atomic.Int64
	total     atomic.Uint64
	rejected  atomic.Uint64
	handBacks atomic.Uint64 // connections given back to their loop by serveAside
	refusing  atomic.Int32  // goroutines answering TLS clients over --max-clients

	mu       sync.Mutex      // guards conns, closing, and each conn's nc and lp
	conns    map[*Conn]*conn // the open connections
	closing  bool
	stopping atomic.Bool    // closing, for the event loops
	loops    []*loop        // nil: a goroutine per connection
	wg       sync.WaitGroup // connection goroutines and event loops

	// bufs holds *connBuffers for serveConn, asides *aside for serveAside (loop_linux.go),
	// which an edge runs for every batch that waits on its origin: without reuse, each
	// allocated its buffers anew.
	bufs     sync.Pool
	asides   sync.Pool
	work     chan func()   // to an idle worker (workers.go)
	quit     chan struct{} // closed by Shutdown: idle workers end
	quitOnce sync.Once

	query  queryBudget // MaxQueryBuffer (batch.go)
	closes *closeLog   // connections closed by reason (batch.go)
}

// connBuffers are a goroutine-served connection's read buffer and argument slice.
type connBuffers struct {
	buf  []byte
	argv [][]byte
}

// New returns a Server; Listen then Serve start it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Limits == (resp.Limits{}) {
		cfg.Limits = resp.DefaultLimits()
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.MaxQueryBuffer <= 0 {
		cfg.MaxQueryBuffer = 64 << 20
	}
	if cfg.PushLimit <= 0 {
		cfg.PushLimit = defaultPushLimit
	}
	return &Server{cfg: cfg, log: cfg.Logger, conns: make(map[*Conn]*conn), work: make(chan func()), quit: make(chan struct{}),
		query: queryBudget{holders: make(map[*conn]struct{})}, closes: newCloseLog()}
}

// Listen binds the RESP address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Addr, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.ln = ln
	if s.cfg.EventLoops > 0 && s.cfg.TLS == nil && loopsAvailable() {
		if err := s.startLoops(s.cfg.EventLoops); err != nil {
			_ = ln.Close()
			return fmt.Errorf("start event loops: %w", err)
		}
	}
	return nil
}

// Addr returns the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until Shutdown. It returns nil after Shutdown.
func (s *Server) Serve(h Handler) error {
	s.handler = h
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and the like: wait, bounded, and go on.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "error", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.total.Add(1)
		s.accept(c)
	}
}

func (s *Server) accept(c net.Conn) {
	now := time.Now()
	sess := &Conn{ID: s.nextID.Add(1), Addr: c.RemoteAddr().String(), LocalAddr: c.LocalAddr().String()}
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	if s.closing || len(s.conns) >= s.cfg.MaxClients {
		s.mu.Unlock()
		s.rejected.Add(1)
		s.refuseClient(c, now)
		return
	}
	s.setPushBounds(sess)
	cn := &conn{sess: sess, h: s.handler.Open(sess, now.UnixMilli())}
	s.conns[sess] = cn
	if tc, ok := c.(*net.TCPConn); ok && s.loops != nil {
		s.mu.Unlock()
		if !s.adopt(tc, cn) {
			s.forget(cn)
		}
		return
	}
	cn.nc = c
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(cn, c)
}

// maxRefusing bounds the goroutines that tell TLS clients over --max-clients so.
const maxRefusing = 64

// refuseClient answers a connection over --max-clients with Redis's error and closes it,
// within a second. Over TLS the answer needs a handshake, which a client can stall: it is
// written from a goroutine (at most maxRefusing at once; past them the connection is
// closed without an answer), never from the accepting one.
func (s *Server) refuseClient(c net.Conn, now time.Time) {
	_ = c.SetDeadline(now.Add(time.Second))
	refuse := func() {
		_, _ = c.Write([]byte("-ERR max number of clients reached\r\n"))
		_ = c.Close()
	}
	if _, ok := c.(*tls.Conn); !ok {
		refuse()
		return
	}
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		_ = c.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		refuse()
	}()
}

// forget removes a closed connection: its slot, its request bytes, its session's state.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.sess)
	s.mu.Unlock()
	c.sess.push.close()
	s.release(c)
	c.sess.end()
	c.h.Close()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// serveConn is the connection's goroutine: read, parse, serve, write, until the peer
// leaves, QUITs, errs, times out, or sends a protocol error. Serving is serveBatch's
// (batch.go); the session's NoWait is off, so requests wait where they must.
func (s *Server) serveConn(c *conn, nc net.Conn) {
	sess, h := c.sess, c.h
	defer func() {
		_ = nc.Close()
		s.forget(c)
		s.wg.Done()
	}()
	if tc, ok := nc.(*tls.Conn); ok {
		if err := s.handshake(tc); err != nil {
			s.logClose(closeHandshake, sess.Addr, err)
			return
		}
		sess.CertVerified = len(tc.ConnectionState().VerifiedChains) > 0
	}
	cb, _ := s.bufs.Get().(*connBuffers)
	if cb == nil {
		cb = &connBuffers{buf: make([]byte, 0, initialBuffer), argv: make([][]byte, 0, 16)}
	}
	buf, argv := cb.buf[:0], cb.argv[:0]
	defer func() {
		// Back to the pool only at its usual size; the arguments alias buf, which is
		// reused whole, and no handler keeps an argument past its call.
		if cap(buf) == initialBuffer {
			clear(argv[:cap(argv)])
			cb.buf, cb.argv = buf[:0], argv[:0]
			s.bufs.Put(cb)
		}
	}()
	var err error
	var w resp.Writer
	w.SetProto(h.Proto())
	var wd, rd deadline
	c.wmu.Lock() // the write turn, but while reading (push.go)
	defer c.wmu.Unlock()
	s.ownPushes(c, nc)
	flushEarly := func() bool {
		if s.writeAll(c, nc, w.Bytes(), &wd, time.Now()) != nil {
			return false
		}
		w.Reset()
		// The write may have waited: the rest of the batch is decided after it.
		h.Touch(time.Now().UnixMilli())
		return true
	}
	for {
		if len(buf) == cap(buf) {
			if buf, err = s.growRequest(c, buf); err != nil {
				s.refuse(c, nc, &w, err)
				return
			}
		}
		if !s.armRead(c, nc, &rd, len(buf) > 0) {
			return
		}
		c.wmu.Unlock()
		n, rerr := nc.Read(buf[len(buf):cap(buf)])
		c.wmu.Lock()
		buf = buf[:len(buf)+n]
		if n == 0 {
			s.readFailed(c, rerr, len(buf) > 0)
			return
		}
		now := time.Now()
		h.Touch(now.UnixMilli())

		r := s.serveBatch(sess, h, &w, buf, &argv, flushEarly)
		switch r.stop {
		case stopError:
			s.refuse(c, nc, &w, r.err)
			return
		case stopFull: // flushEarly failed: the connection is gone
			return
		}
		buf = buf[:copy(buf, buf[r.off:])]
		buf = s.releaseRequest(c, buf, true)
		if err := s.writeAll(c, nc, w.Bytes(), &wd, now); err != nil || r.stop == stopClosing || rerr != nil {
			return
		}
		w.Reset()
	}
}

// handshake runs a TLS connection's handshake within HandshakeTimeout, so that a client
// that stalls it cannot hold a --max-clients slot.
func (s *Server) handshake(tc *tls.Conn) error {
	_ = tc.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if s.stopping.Load() { // Shutdown may have set its deadline before ours
		return errors.New("server is shutting down")
	}
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("tls handshake: %w", err)
	}
	return tc.SetDeadline(time.Time{})
}

// armRead sets the read deadline of the next read: ReadTimeout while a request is
// incomplete, IdleTimeout (Redis's timeout) while none is, else none. A deadline is moved
// only when it is a quarter of its timeout old, so a connection times out between 1 and
// 1.25 times its timeout after its last progress. It reports false once Shutdown has
// begun (whose deadline this one must not replace).
func (s *Server) armRead(c *conn, nc net.Conn, rd *deadline, partial bool) bool {
	kind, d := timerNone, time.Duration(0)
	switch {
	case partial && s.cfg.ReadTimeout > 0:
		kind, d = timerRead, s.cfg.ReadTimeout
	case !partial && s.cfg.IdleTimeout > 0 && !c.h.Internal():
		kind, d = timerIdle, s.cfg.IdleTimeout
	}
	if kind == timerNone && rd.kind == timerNone {
		return true
	}
	now := time.Now()
	if kind != rd.kind || now.Sub(rd.setAt) > d/4 {
		at := time.Time{}
		if kind != timerNone {
			at = now.Add(d + d/4)
		}
		_ = nc.SetReadDeadline(at)
		rd.kind, rd.setAt = kind, now
	}
	return !s.stopping.Load()
}

// readFailed closes a connection whose read returned nothing: counted when a timeout
// closed it (partial says whether a request was incomplete), silently when the client
// left or the server is stopping.
func (s *Server) readFailed(c *conn, err error, partial bool) {
	var ne net.Error
	if s.stopping.Load() || c.evicted.Load() || !errors.As(err, &ne) || !ne.Timeout() {
		return
	}
	if partial {
		s.logClose(closeReadTimeout, c.sess.Addr, nil)
	} else {
		s.logClose(closeIdleTimeout, c.sess.Addr, nil)
	}
}

// refuse answers what was served so far and the protocol error err; the caller then
// closes the connection.
func (s *Server) refuse(c *conn, nc net.Conn, w *resp.Writer, err error) {
	s.countRefusal(c, err)
	w.Error("ERR " + err.Error())
	var wd deadline
	_ = s.writeAll(c, nc, w.Bytes(), &wd, time.Now())
}

// deadline remembers when a connection's deadline was last moved, so that a busy
// connection moves it a few times per timeout instead of once per batch.
type deadline struct {
	setAt time.Time
	kind  int // of a read deadline: timerNone, timerRead or timerIdle
}

const (
	timerNone = iota
	timerRead
	timerIdle
)

// writeAll writes b. WriteTimeout counts from the last progress: a write that times out
// goes on while it took bytes or the kernel sent some of what was queued (see unsentFD),
// looking again every quarter of WriteTimeout, so a client that reads a large reply
// slowly but steadily is never dropped. The first look at the queue cannot tell whether
// it shrank before, so WriteTimeout counts again from it: a client that takes nothing is
// dropped after 2.25 to 2.5 WriteTimeouts. The deadline is moved only when it is a
// quarter of WriteTimeout old.
func (s *Server) writeAll(c *conn, nc net.Conn, b []byte, dl *deadline, now time.Time) error {
	if len(b) == 0 {
		return nil
	}
	wt := s.cfg.WriteTimeout
	if now.Sub(dl.setAt) > wt/4 {
		if err := nc.SetWriteDeadline(now.Add(wt + wt/4)); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
		dl.setAt = now
	}
	lastQ, stalledSince := -1, dl.setAt
	for len(b) > 0 {
		n, err := nc.Write(b)
		b = b[n:]
		if err == nil {
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || s.stopping.Load() {
			return fmt.Errorf("write replies: %w", err)
		}
		now = time.Now()
		q, ok := unsent(nc)
		progressed := n > 0 || (ok && lastQ >= 0 && q < lastQ)
		firstLook := ok && lastQ < 0 // the queue is known from now on: look again
		if ok {
			lastQ = q
		}
		if progressed || firstLook {
			stalledSince = now
		} else if now.Sub(stalledSince) >= wt {
			s.logClose(closeWriteTimeout, c.sess.Addr, nil)
			return fmt.Errorf("write replies: %w", err)
		}
		if err := nc.SetWriteDeadline(now.Add(max(wt/4, time.Millisecond))); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
		dl.setAt = time.Time{} // the next writeAll sets a full one
	}
	return nil
}

// Shutdown stops accepting, closes every connection and waits for their goroutines, at
// most until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.stopping.Store(true)
	for _, c := range s.conns {
		// Unblock reads; a batch being served finishes and its write fails or lands.
		if c.nc != nil {
			_ = c.nc.SetReadDeadline(time.Now())
		}
	}
	s.mu.Unlock()
	s.quitOnce.Do(func() { close(s.quit) })
	for _, l := range s.loops {
		l.wake()
	}
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("shutdown: connections still open: %w", ctx.Err())
	}
	return err
}

// Sessions returns the open connections' handler states, in the order they were accepted.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return cs[i].sess.ID < cs[j].sess.ID })
	out := make([]Session, len(cs))
	for i, c := range cs {
		out[i] = c.h
	}
	return out
}

// ConnStats returns the connection counters.
func (s *Server) ConnStats() ConnStats {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	cl := &s.closes.n
	return ConnStats{Connected: n, Total: s.total.Load(), Rejected: s.rejected.Load(), Port: s.port,
		HandBacks:         s.handBacks.Load(),
		ReadTimeouts:      cl[closeReadTimeout].Load(),
		IdleTimeouts:      cl[closeIdleTimeout].Load(),
		WriteTimeouts:     cl[closeWriteTimeout].Load(),
		HandshakeTimeouts: cl[closeHandshake].Load(),
		QueryEvictions:    cl[closeQueryBuffer].Load(),
		ProtocolErrors:    cl[closeProtocol].Load(),
		PushCuts:          cl[closePushLimit].Load(),
		QueryBufferBytes:  s.query.bytes.Load(),
		MaxQueryBuffer:    s.cfg.MaxQueryBuffer,
	}
}
