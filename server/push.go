package server

import (
	"net"
	"sync"
	"time"
)

// Pushes: bytes for a connection that come from outside its own requests (pub/sub
// messages PUBLISH sends it, invalidations of keys it cached, sent from another client's
// request or a timer). Whoever produces one calls Conn.Push from its own goroutine; the
// bytes wait in the connection's outbox, under the outbox's lock, and the connection's
// owner is told (notify), never blocking the pusher:
//
//   - an event loop (loop_linux.go) is woken; at the top of its next iteration it writes
//     each pushed connection's outbox (after the replies of the batch before, which it
//     wrote at the end of that batch), or, when the socket has replies pending, appends
//     nothing until they drain;
//   - a goroutine owner (serveConn) holds the connection's write turn (conn.wmu) from the
//     read that returned requests until their replies are written; a flusher goroutine,
//     started per notification, takes the turn and writes the outbox.
//
// So a push never lands inside a reply, and is never written before a reply that was
// served before it was pushed (a client that cached a value from a reply then reads the
// invalidation after it). A push may be written after replies served later: that only
// delays it, which no client can tell from a slower network.
//
// Bound: the outbox holds at most PushLimit bytes (Redis's client-output-buffer-limit
// pubsub hard limit), and at most PushSoftLimit for PushSoftFor; past either the
// connection is cut, as Redis closes a slow subscriber, and Push reports false from then
// on.

// outbox is a connection's pushed bytes not yet given to its socket.
type outbox struct {
	mu        sync.Mutex
	buf       []byte
	hard      int           // bound on len(buf); 0: defaultPushLimit (a Conn made outside a Server)
	soft      int           // past it for softFor, the connection is cut; 0: no soft bound
	softFor   time.Duration //
	softSince time.Time     // when buf last went past soft; zero while under it
	cut       bool          // over a bound: the owner closes the connection
	cutTold   bool          // the cut was counted and logged
	closed    bool          // the connection is gone: pushes are dropped
	notify    func(uint64)  // tells the owner of turn gen; nil until one is set
	queued    bool          // notify was called and the owner has not taken the bytes since
	gen       uint64        // the owner's turn: a flusher of an older turn writes nothing
}

// Push appends p, one complete RESP message (a RESP3 push, or a RESP2 pub/sub message),
// to the bytes the connection is sent after the replies served so far. It never blocks.
// It reports false when the connection is closed, or was cut because its client does not
// read its pushes (its outbox passed the server's bound); p is then dropped.
func (c *Conn) Push(p []byte) bool {
	o := &c.push
	o.mu.Lock()
	if o.closed || o.cut {
		o.mu.Unlock()
		return false
	}
	o.buf = append(o.buf, p...)
	ok := o.checkBound(time.Now())
	var notify func(uint64)
	if (!o.queued || !ok) && o.notify != nil { // a cut is told even to an owner told before
		o.queued, notify = true, o.notify
	}
	gen := o.gen
	o.mu.Unlock()
	if notify != nil {
		notify(gen)
	}
	return ok
}

// checkBound cuts the connection when buf is past a bound (o.mu held); false when cut.
func (o *outbox) checkBound(now time.Time) bool {
	hard := o.hard
	if hard <= 0 { // a Conn made outside a Server: the Server's default
		hard = defaultPushLimit
	}
	switch {
	case len(o.buf) > hard:
	case o.soft > 0 && len(o.buf) > o.soft:
		if o.softSince.IsZero() {
			o.softSince = now
			return true
		}
		if now.Sub(o.softSince) < o.softFor {
			return true
		}
	default:
		o.softSince = time.Time{}
		return true
	}
	o.cut, o.buf = true, nil
	return false
}

// TakePushed returns the bytes pushed to c and not yet taken, and empties its outbox.
// The server's owner of the connection calls it; a test of a Handler without a server
// may too.
func (c *Conn) TakePushed() []byte {
	o := &c.push
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf
	o.buf = nil
	return b
}

// own makes notify the way the owner of the connection is told of pushes, for a new turn,
// and returns that turn, which notify is given. Bytes already waiting are announced at
// once.
func (o *outbox) own(notify func(gen uint64)) uint64 {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return 0
	}
	o.gen++
	gen := o.gen
	o.notify = notify
	o.queued = len(o.buf) > 0 || o.cut
	announce := o.queued
	o.mu.Unlock()
	if announce {
		notify(gen)
	}
	return gen
}

// isCut reports whether the connection was cut for its bound.
func (o *outbox) isCut() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

// closeCut counts and logs c's cut, once however many of its owners' paths see it.
func (s *Server) closeCut(c *conn) {
	o := &c.sess.push
	o.mu.Lock()
	first := !o.cutTold
	o.cutTold = true
	o.mu.Unlock()
	if first {
		s.logClose(closePushLimit, c.sess.Addr, nil)
	}
}

// take returns the waiting bytes for the owner of turn gen, and whether the connection
// was cut; ok is false when gen is no longer the owner's turn (nothing is taken).
func (o *outbox) take(gen uint64) (b []byte, cut, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen != o.gen {
		return nil, false, false
	}
	o.queued = false
	b, o.buf = o.buf, nil
	if !o.cut {
		o.softSince = time.Time{}
	}
	return b, o.cut, true
}

// close drops the outbox once its connection has closed.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed, o.buf, o.notify = true, nil, nil
	o.gen++
	o.mu.Unlock()
}

// defaultPushLimit is Config.PushLimit's default, Redis's pubsub hard limit.
const defaultPushLimit = 32 << 20

// setPushBounds sets a new connection's outbox bounds from the server's Config.
func (s *Server) setPushBounds(c *Conn) {
	c.push.hard, c.push.soft, c.push.softFor = s.cfg.PushLimit, s.cfg.PushSoftLimit, s.cfg.PushSoftFor
}

// ownPushes makes serveConn's goroutine the owner of c's pushes: each notification starts
// a flusher that writes the outbox in the connection's write turn. Called once the
// goroutine has written the replies it was handed, so that no push overtakes them.
func (s *Server) ownPushes(c *conn, nc net.Conn) {
	c.sess.push.own(func(gen uint64) { go s.flushPushes(c, nc, gen) })
}

// flushPushes writes c's outbox in the connection's write turn, for the owner of turn
// gen; a connection cut for its bound is closed (its owner's read then fails).
func (s *Server) flushPushes(c *conn, nc net.Conn, gen uint64) {
	if c.sess.push.isCut() { // at once: a write stuck on this client may hold the turn
		s.closeCut(c)
		_ = nc.Close()
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, cut, ok := c.sess.push.take(gen)
	switch {
	case !ok:
	case cut:
		_ = nc.Close()
	case len(b) > 0:
		var wd deadline
		if s.writeAll(c, nc, b, &wd, time.Now()) != nil {
			_ = nc.Close()
		}
	}
}
