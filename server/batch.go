package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/ratelog"
	"github.com/ratchet/ratchet/resp"
)

// This file owns what every connection's owner (an event loop, loop_linux.go, or a
// goroutine, serveConn in server.go) does the same way, so that each bound is enforced in
// one place:
//
//   - serveBatch: parse the complete requests of what was read, serve them in order,
//     write early past flushAt, stop at QUIT, a protocol error or a request that must wait
//     (Conn.NoWait, on an event loop);
//   - growRequest and keepRequest: a connection's buffer for an incomplete request, bounded
//     by Limits.MaxBuffer per connection and by MaxQueryBuffer across connections (past
//     it, the connection holding the most is closed);
//   - closing a connection for a reason: counted (ConnStats) and logged at most once per
//     logEvery per reason (ratelog).
//
// The owners keep only what differs: how bytes are read and written, and the timers
// (a goroutine sets socket deadlines; a loop sweeps its connections, sweep in
// loop_linux.go). Both measure ReadTimeout from the last byte read while a request is
// incomplete, IdleTimeout from the last request, and WriteTimeout from the last write
// that made progress.

// logEvery is the most often one kind of connection event is logged.
const logEvery = 10 * time.Second

// conn is what the server knows of one open connection, whoever owns it.
type conn struct {
	sess *Conn   // what the server and the handler share
	h    Session // the handler's state
	// nc is the connection while a goroutine owns it; nil while an event loop does.
	// Guarded by Server.mu.
	nc net.Conn
	// lp is the owning event loop, nil while a goroutine owns it. Guarded by Server.mu.
	lp *loop

	held    int64       // request-buffer bytes counted in Server.queryBytes; guarded by Server.qmu
	evicted atomic.Bool // closed to make room in MaxQueryBuffer: its owner closes it next
	wmu     sync.Mutex  // a goroutine owner's write turn, which pushes wait for (push.go)
}

// closeReason is why the server closed a connection.
type closeReason int

const (
	closeReadTimeout closeReason = iota
	closeIdleTimeout
	closeWriteTimeout
	closeHandshake
	closeQueryBuffer
	closeProtocol
	closePushLimit
	nReasons
)

var reasonText = [nReasons]string{
	closeReadTimeout:  "incomplete request made no progress for --read-timeout",
	closeIdleTimeout:  "idle for --timeout",
	closeWriteTimeout: "replies not read for --write-timeout",
	closeHandshake:    "TLS handshake failed or did not finish in --tls-handshake-timeout",
	closeQueryBuffer:  "held the most request bytes when --max-query-buffer was full",
	closeProtocol:     "protocol error",
	closePushLimit:    "pushed messages not read past --pubsub-output-limit",
}

// closeLog counts the connections closed by reason and rate-limits their log lines.
type closeLog struct {
	n   [nReasons]atomic.Uint64
	lim [nReasons]*ratelog.Limiter
}

func newCloseLog() *closeLog {
	cl := &closeLog{}
	for i := range cl.lim {
		cl.lim[i] = ratelog.New(logEvery)
	}
	return cl
}

// logClose counts a connection closed for r and logs it unless one like it was logged in
// the last logEvery.
func (s *Server) logClose(r closeReason, remote string, err error) {
	s.closes.n[r].Add(1)
	ok, suppressed := s.closes.lim[r].Allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{"reason", reasonText[r], "remote", remote}
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	if suppressed > 0 {
		attrs = append(attrs, "similar_not_logged", suppressed)
	}
	s.log.Info("closing connection", attrs...)
}

// stop says why serveBatch returned.
type stop int

const (
	stopDone    stop = iota // every complete request served; data[off:] is incomplete or empty
	stopFull                // flushEarly reported a full socket: serve the rest once it drains
	stopWait                // a request must wait (Conn.NoWait): data[off:] starts with it
	stopClosing             // QUIT: the connection closes once its replies are written
	stopError               // protocol error (err): answer it after w's replies, then close
)

// batchResult is what serveBatch did.
type batchResult struct {
	off  int   // bytes of data served
	stop stop  // why it returned
	err  error // the protocol error, with stopError
}

// serveBatch serves the complete requests at the start of data, appending replies to w.
// argv is reused for each request's arguments. flushEarly is called whenever w holds
// flushAt bytes or more; it writes them and reports false when the connection cannot take
// more now. Under Conn.NoWait a request that would wait sets WouldBlock and writes
// nothing: serveBatch then returns stopWait, and the owner has that request served once
// more where it may wait (an event loop's serveAside).
func (s *Server) serveBatch(sess *Conn, h Session, w *resp.Writer, data []byte, argv *[][]byte,
	flushEarly func() bool) batchResult {
	var r batchResult
	lim := s.cfg.Limits
	for r.off < len(data) {
		if sess.Quit {
			r.stop = stopClosing
			return r
		}
		args, used, perr := resp.Parse(data[r.off:], *argv, lim)
		if perr != nil { // the owner answers it and closes the connection
			r.stop, r.err = stopError, perr
			return r
		}
		if used == 0 {
			break
		}
		*argv = args[:0]
		if len(args) > 0 {
			h.Serve(w, args)
			// Set under NoWait only (nothing was written or counted); set without it, by
			// mistake, it is dropped: no request is served twice.
			if sess.WouldBlock {
				sess.WouldBlock = false
				if sess.NoWait {
					r.stop = stopWait
					return r
				}
			}
		}
		r.off += used
		if w.Len() >= flushAt && !flushEarly() {
			r.stop = stopFull
			return r
		}
	}
	if sess.Quit {
		r.stop = stopClosing
	}
	return r
}

// errQueryBudget closes a connection that holds the most request bytes when
// MaxQueryBuffer is full.
var errQueryBudget = &resp.ProtocolError{Reason: "request buffers of all connections are at --max-query-buffer"}

// countRefusal counts (and logs) a connection about to be closed with the protocol error
// err: a malformed or oversized request, or no room in MaxQueryBuffer (a connection
// evicted by another's growth was counted when it was chosen). Both owners then answer
// err after the replies served so far and close the connection.
func (s *Server) countRefusal(c *conn, err error) {
	switch {
	case err != errQueryBudget:
		s.logClose(closeProtocol, c.sess.Addr, err)
	case !c.evicted.Load():
		s.logClose(closeQueryBuffer, c.sess.Addr, err)
	}
}

// growRequest returns buf with room to read more of an incomplete request: twice its
// capacity, at most Limits.MaxBuffer. It fails with resp.ErrTooBig when buf is at that
// bound, and with errQueryBudget when c holds the most request bytes and the budget
// cannot fit the growth.
func (s *Server) growRequest(c *conn, buf []byte) ([]byte, error) {
	maxBuf := s.cfg.Limits.MaxBuffer
	if cap(buf) >= maxBuf {
		return buf, resp.ErrTooBig
	}
	n := min(max(2*cap(buf), initialBuffer), maxBuf)
	if err := s.account(c, n); err != nil {
		return buf, err
	}
	grown := make([]byte, len(buf), n)
	copy(grown, buf)
	return grown, nil
}

// keepRequest copies rest, an incomplete request read into a shared buffer, into dst (the
// connection's own buffer, reused when large enough).
func (s *Server) keepRequest(c *conn, dst, rest []byte) ([]byte, error) {
	maxBuf := s.cfg.Limits.MaxBuffer
	if len(rest) >= maxBuf {
		return dst, resp.ErrTooBig
	}
	if cap(dst) < len(rest) {
		n := min(max(initialBuffer, 2*len(rest)), maxBuf)
		if err := s.account(c, n); err != nil {
			return dst, err
		}
		dst = make([]byte, 0, n)
	}
	return append(dst[:0], rest...), nil
}

// releaseRequest drops an emptied request buffer that has grown past the usual size,
// returning its bytes to the budget; fresh says whether the owner wants a new buffer of
// the usual size back (a goroutine reads into it) or none (a loop reads into its own).
func (s *Server) releaseRequest(c *conn, buf []byte, fresh bool) []byte {
	if len(buf) > 0 || cap(buf) <= 4*initialBuffer {
		return buf
	}
	_ = s.account(c, 0) // shrinking never fails
	if fresh {
		return make([]byte, 0, initialBuffer)
	}
	return nil
}

// queryBudget is the state of MaxQueryBuffer.
type queryBudget struct {
	mu      sync.Mutex         // guards holders and every conn.held
	holders map[*conn]struct{} // connections with held > 0
	bytes   atomic.Int64       // sum of held
}

// account sets the request-buffer bytes c holds to a buffer of capacity n (0: none). Each
// connection's first initialBuffer bytes are its own (the per-connection overhead);
// beyond them every byte counts against MaxQueryBuffer. When a growth does not fit, the
// connections holding the most are closed until it does; when c itself holds the most,
// it fails with errQueryBudget and the caller closes c.
func (s *Server) account(c *conn, n int) error {
	want := int64(max(n-initialBuffer, 0))
	q := &s.query
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.evicted.Load() {
		return errQueryBudget
	}
	delta := want - c.held
	for delta > 0 && q.bytes.Load()+delta > s.cfg.MaxQueryBuffer {
		var big *conn
		for h := range q.holders {
			if h != c && (big == nil || h.held > big.held) {
				big = h
			}
		}
		if big == nil || big.held <= want {
			return errQueryBudget
		}
		s.evictLocked(big)
	}
	q.bytes.Add(delta)
	c.held = want
	if want > 0 {
		q.holders[c] = struct{}{}
	} else {
		delete(q.holders, c)
	}
	return nil
}

// evictLocked closes victim to make room: its bytes leave the budget now, and its owner
// closes it (a goroutine's connection is closed at once, which ends its read; a loop is
// told and woken). q.mu is held.
func (s *Server) evictLocked(victim *conn) {
	q := &s.query
	q.bytes.Add(-victim.held)
	victim.held = 0
	delete(q.holders, victim)
	victim.evicted.Store(true)
	s.mu.Lock()
	nc, lp := victim.nc, victim.lp
	s.mu.Unlock()
	s.logClose(closeQueryBuffer, victim.sess.Addr, nil)
	switch {
	case nc != nil:
		_ = nc.Close()
	case lp != nil:
		lp.evict()
	}
}

// release returns all of c's request bytes to the budget; c has closed.
func (s *Server) release(c *conn) {
	q := &s.query
	q.mu.Lock()
	q.bytes.Add(-c.held)
	c.held = 0
	delete(q.holders, c)
	q.mu.Unlock()
}
