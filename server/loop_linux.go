//go:build linux

package server

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ratchet/ratchet/resp"
)

// The event loops serve plain TCP connections when Config.EventLoops is set. Each loop
// has its own epoll set; an accepted connection is given to one loop, which owns it from
// then on. A loop waits for readable sockets, reads each once and serves every complete
// request in it; once every ready socket is served it writes each one's replies with one
// write, as redis-server's event loop does (writing during the batch measured a wider
// latency tail at -P 1). Reads and writes of these non-blocking sockets are raw system
// calls, and epoll_wait blocks only when a raw poll found nothing ready.
// Compared with a goroutine per connection it saves the read that finds no data and a
// park and wake-up per batch, and it serves ready connections in turn, which keeps the
// latency tail short when every connection has one request in flight.
//
// A loop never waits on the network for a request: a command that would (an edge's origin
// read or hand-off, a script; see Conn.NoWait) sets WouldBlock, and the loop serves that
// request, and the rest of its batch, from a goroutine with NoWait off (serveAside): each
// request is tried at most once on the loop and served at most once more. The socket stays
// the loop's, which does not touch the connection meanwhile (and takes it out of its
// epoll set only if an event comes); the goroutine's replies are written by the loop when
// the connection comes back.
//
// Bounds: a loop shares one read buffer, one reply buffer and one buffer of the batch's
// held replies (at most maxHold, past which replies are written at once) among its
// connections; a connection keeps its own buffers only for a request that arrived in part
// (at most Limits.MaxBuffer, within MaxQueryBuffer: batch.go) and for replies its socket
// did not take. While replies are pending a connection is not read (backpressure).
//
// Timers: the loop sweeps its connections every sweepEvery (sweep): replies pending with
// no write progress for WriteTimeout, an incomplete request with no byte read for
// ReadTimeout, no request for IdleTimeout, and connections evicted from MaxQueryBuffer
// are closed there.

const (
	loopReadBuffer = 64 << 10
	loopEvents     = 256
	wakeToken      = -1 // epoll data of the loop's eventfd
)

type loop struct {
	s       *Server
	epfd    int
	wakefd  int
	scratch []byte      // read buffer shared by the loop's connections
	w       resp.Writer // reply buffer shared likewise
	argv    [][]byte
	events  []syscall.EpollEvent
	conns   map[int32]*loopConn // owned by the loop goroutine
	pending int                 // connections with unwritten replies
	held    []heldReplies       // replies that wait for the end of the batch, in holdBuf
	holdBuf []byte

	mu     sync.Mutex // guards added, back and closed, and the epoll set and eventfd against closing
	added  []*loopConn
	nAdded atomic.Int32
	back   []*loopConn // served aside, to take back (serveAside)
	nBack  atomic.Int32
	// sleeping is set while the loop blocks in epoll_wait: only then does a connection
	// given back wake it (the loop looks at nBack after setting it, before blocking).
	sleeping atomic.Bool
	taking   []*loopConn // back's contents while the loop takes them
	closed   bool

	evicted   atomic.Bool // a connection of this loop was evicted from MaxQueryBuffer
	nextSweep time.Time
	yielded   time.Time // when the loop last gave its thread up (yieldEvery)

	pushq   []pushedConn // connections with pushes to write (push_linux.go); guarded by mu
	nPushed atomic.Int32 // len(pushq), read without mu
	later   []pushedConn // pushes to write after the held replies of their connection
}

// heldReplies are c's replies of the batch being served: holdBuf[start:end].
type heldReplies struct {
	c          *loopConn
	start, end int
}

// maxHold bounds the replies a loop holds for the end of a batch; past it, a connection's
// replies are written as soon as they are served.
const maxHold = 1 << 20

// loopConn is one connection owned by a loop.
type loopConn struct {
	fd       int
	cn       *conn
	sess     *Conn
	h        Session
	in       []byte    // unserved request bytes carried to the next read
	out      []byte    // replies the socket did not take yet
	outSince time.Time // the last write progress while out is pending
	outQ     int       // the socket's unsent bytes at the last sweep; -1: not looked yet
	lastRead time.Time // the last read that returned bytes
	proto    int
	// away is set while a goroutine serves c (serveAside); unarmed once an event for c
	// came meanwhile and c left the epoll set. Both are the loop's alone.
	away, unarmed bool
	aside         *aside // what serveAside did, from its return until the loop takes c back
	pushGen       uint64 // the loop's turn as the owner of the connection's pushes (push_linux.go)
	holding       bool   // the connection has replies in the loop's held replies
}

// aside is a goroutine's buffers for serving a loop's connection (serveAside), and what
// it did.
type aside struct {
	w    resp.Writer // the replies of the batch: those the loop had served, then its own
	argv [][]byte
	r    batchResult // of c.in
}

// startLoops creates and starts n event loops.
func (s *Server) startLoops(n int) error {
	for i := 0; i < n; i++ {
		l, err := newLoop(s)
		if err != nil {
			for _, made := range s.loops {
				_ = syscall.Close(made.epfd)
				_ = syscall.Close(made.wakefd)
			}
			s.loops = nil
			return err
		}
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		s.wg.Add(1)
		go l.run()
	}
	return nil
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create: %w", err)
	}
	wakefd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		_ = syscall.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", errno)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: wakeToken}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(wakefd), &ev); err != nil {
		_ = syscall.Close(epfd)
		_ = syscall.Close(int(wakefd))
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	return &loop{
		s: s, epfd: epfd, wakefd: int(wakefd),
		scratch: make([]byte, loopReadBuffer), argv: make([][]byte, 0, 16),
		events: make([]syscall.EpollEvent, loopEvents), conns: make(map[int32]*loopConn),
	}, nil
}

// adopt moves an accepted TCP connection into a loop: its descriptor is duplicated, the
// net.Conn closed (which only drops Go's own poller registration) and the copy added to
// the loop's epoll set. It reports false when the connection could not be moved (it is
// then closed).
func (s *Server) adopt(c *net.TCPConn, cn *conn) bool {
	sess := cn.sess
	rc, err := c.SyscallConn()
	if err != nil {
		_ = c.Close()
		return false
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(f uintptr) {
		// F_DUPFD_CLOEXEC: the copy is never inherited by a child process.
		var r uintptr
		var errno syscall.Errno
		r, _, errno = syscall.Syscall(syscall.SYS_FCNTL, f, syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			dupErr = errno
			return
		}
		fd = int(r)
	}); err != nil || dupErr != nil {
		_ = c.Close()
		s.log.Warn("event loop: cannot take the connection", "error", errors.Join(err, dupErr))
		return false
	}
	_ = c.Close()
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return false
	}
	l := s.loops[uint64(sess.ID)%uint64(len(s.loops))]
	lc := &loopConn{fd: fd, cn: cn, sess: sess, h: cn.h, proto: cn.h.Proto(), lastRead: time.Now()}
	s.mu.Lock()
	cn.nc, cn.lp = nil, l
	s.mu.Unlock()
	sess.NoWait = true
	// Under l.mu: the loop cannot close its epoll set meanwhile, and it takes the new
	// connection from added (level-triggered events that come first are seen again).
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = syscall.Close(fd)
		return false
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		s.log.Warn("event loop: epoll_ctl add", "error", err)
		_ = syscall.Close(fd)
		return false
	}
	l.added = append(l.added, lc)
	l.nAdded.Add(1)
	return true
}

// wake interrupts the loop's epoll_wait, unless the loop has closed.
func (l *loop) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	one := [8]byte{1}
	_, _ = syscall.Write(l.wakefd, one[:])
}

// evict has the loop close its connections evicted from MaxQueryBuffer.
func (l *loop) evict() {
	l.evicted.Store(true)
	l.wake()
}

// sweepEvery is how often a loop looks for connections to close: a quarter of the
// shortest timeout in force, from 10 ms to 1 s; 0 when none is.
func (l *loop) sweepEvery() time.Duration {
	cfg := &l.s.cfg
	d := time.Duration(0)
	for _, t := range []time.Duration{cfg.ReadTimeout, cfg.IdleTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if l.pending > 0 && (d == 0 || cfg.WriteTimeout < d) {
		d = cfg.WriteTimeout
	}
	if d == 0 {
		return 0
	}
	return min(max(d/4, 10*time.Millisecond), time.Second)
}

func (l *loop) run() {
	defer l.s.wg.Done()
	for {
		timeout := -1
		every := l.sweepEvery()
		if every > 0 {
			timeout = int(every / time.Millisecond)
		}
		n, err := l.wait(timeout)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			l.s.log.Error("event loop: epoll_wait failed; closing its connections", "error", err)
			l.closeAll()
			return
		}
		if l.nAdded.Load() > 0 {
			l.takeAdded()
		}
		if l.nPushed.Load() > 0 {
			l.takePushed(time.Now())
		}
		if l.s.stopping.Load() {
			l.closeAll()
			return
		}
		now := time.Now()
		for i := 0; i < n; i++ {
			ev := l.events[i]
			if ev.Fd == wakeToken {
				var buf [8]byte
				_, _ = syscall.Read(l.wakefd, buf[:])
				continue
			}
			c := l.conns[ev.Fd]
			if c == nil {
				continue
			}
			if c.away { // it would come again and again (level-triggered) until c is back
				if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					c.cn.sess.end() // the client hung up: what its request waits on may stop
				}
				l.unarm(c)
				continue
			}
			if len(c.out) > 0 {
				if ev.Events&(syscall.EPOLLOUT|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
					l.writable(c, now)
				}
				continue
			}
			l.readable(c, now)
		}
		// Connections given back by serveAside; one given back later is seen by the next
		// wait (sleeping).
		if l.nBack.Load() > 0 {
			l.takeBack(now)
		}
		if l.nPushed.Load() > 0 { // pushes of this batch go out before its replies (push_linux.go)
			l.takePushed(now)
		}
		l.writeHeld(now)
		l.pushAfterHeld(now)
		// Load before Swap: no locked instruction per iteration while nothing was evicted.
		if (l.evicted.Load() && l.evicted.Swap(false)) || (every > 0 && !now.Before(l.nextSweep)) {
			l.sweep(now)
			l.nextSweep = now.Add(every)
		}
		// Give the thread up every yieldEvery: a goroutine this loop readied (the other
		// loop, woken by the unlock of a shard it waited on) waits in this thread's run
		// queue, which no other thread takes from while it has work of its own, and a
		// loop that always finds events ready (wait's raw call) would keep it there until
		// the scheduler preempts it (10 ms).
		if n > 0 && now.Sub(l.yielded) >= yieldEvery {
			l.yielded = now
			runtime.Gosched()
		}
	}
}

// writeHeld writes the replies of the batch just served, one write per connection.
func (l *loop) writeHeld(now time.Time) {
	for i, h := range l.held {
		l.held[i] = heldReplies{}
		c := h.c
		c.holding = false
		if l.conns[int32(c.fd)] != c {
			continue
		}
		b := l.holdBuf[h.start:h.end]
		n, err := writeFD(c.fd, b)
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			l.close(c)
			continue
		}
		if n < len(b) {
			c.out = append(c.out[:0], b[max(n, 0):]...)
			c.outSince, c.outQ = now, -1
			l.pending++
			l.interest(c, syscall.EPOLLOUT)
		}
	}
	l.held = l.held[:0]
	l.holdBuf = l.holdBuf[:0]
}

// takeAdded moves the accepted connections into the loop's table.
func (l *loop) takeAdded() {
	l.mu.Lock()
	added := l.added
	l.added = nil
	l.nAdded.Store(0)
	l.mu.Unlock()
	for _, c := range added {
		l.conns[int32(c.fd)] = c
		l.ownPushes(c)
	}
}

// readable reads what arrived on c and serves it.
func (l *loop) readable(c *loopConn, now time.Time) {
	lim := l.s.cfg.Limits
	var data []byte
	var n int
	var err error
	fromIn := len(c.in) > 0
	if !fromIn {
		n, err = readFD(c.fd, l.scratch[:min(len(l.scratch), lim.MaxBuffer)])
		if n > 0 {
			data = l.scratch[:n]
		}
	} else {
		if len(c.in) == cap(c.in) {
			if c.in, err = l.s.growRequest(c.cn, c.in); err != nil {
				l.refuse(c, err)
				return
			}
		}
		n, err = readFD(c.fd, c.in[len(c.in):cap(c.in)])
		if n > 0 {
			data = c.in[:len(c.in)+n]
		}
	}
	switch {
	case n > 0:
	case errors.Is(err, syscall.EAGAIN):
		return
	default: // EOF or a socket error
		l.close(c)
		return
	}
	now = time.Now() // the batch's instant (Session.Touch): one read per batch
	c.lastRead = now
	c.h.Touch(now.UnixMilli())
	l.serve(c, data, fromIn, now)
}

// serve runs the complete requests at the start of data, writes their replies, and keeps
// the bytes it did not serve in c.in. fromIn says that data is c.in's storage (else it
// is the loop's read buffer).
func (l *loop) serve(c *loopConn, data []byte, fromIn bool, now time.Time) {
	l.w.Reset()
	l.w.SetProto(c.proto)
	r := l.s.serveBatch(c.sess, c.h, &l.w, data, &l.argv, func() bool { return l.write(c, now) })
	c.proto = l.w.Proto()
	blocked := false
	switch r.stop {
	case stopError:
		l.refuse(c, r.err)
		return
	case stopWait: // the request must wait on the network: served aside, with the rest
		l.sendAside(c, data[r.off:], fromIn)
		return
	case stopFull:
		blocked = true
	}
	rest := data[r.off:]
	switch {
	case len(rest) == 0:
		c.in = l.s.releaseRequest(c.cn, c.in[:0], false)
	case fromIn:
		c.in = c.in[:copy(c.in[:cap(c.in)], rest)]
	default:
		if len(rest) >= l.s.cfg.Limits.MaxBuffer && !blocked {
			l.refuse(c, resp.ErrTooBig)
			return
		}
		var err error
		if c.in, err = l.s.keepRequest(c.cn, c.in, rest); err != nil {
			l.refuse(c, err)
			return
		}
	}
	switch {
	case blocked:
	case c.sess.Quit || l.w.Len() == 0 || len(l.holdBuf)+l.w.Len() > maxHold:
		l.write(c, now)
	default: // written at the end of the batch, as redis-server writes after its reads
		start := len(l.holdBuf)
		l.holdBuf = append(l.holdBuf, l.w.Bytes()...)
		l.w.Reset()
		l.held = append(l.held, heldReplies{c: c, start: start, end: len(l.holdBuf)})
		c.holding = true
	}
	if c.sess.Quit && len(c.out) == 0 {
		l.close(c)
	}
}

// write sends the reply buffer to c. It reports false when part of it is left pending
// (or the connection was closed): the caller stops serving c until it drains.
func (l *loop) write(c *loopConn, now time.Time) bool {
	b := l.w.Bytes()
	if len(b) == 0 {
		return true
	}
	l.w.Reset()
	return l.send(c, b, now)
}

// send writes b to c; what the socket does not take waits in c.out. It reports false
// when c now has bytes pending or was closed.
func (l *loop) send(c *loopConn, b []byte, now time.Time) bool {
	n, err := writeFD(c.fd, b)
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		l.close(c)
		return false
	}
	if n == len(b) {
		return true
	}
	c.out = append(c.out[:0], b[max(n, 0):]...)
	c.outSince, c.outQ = now, -1
	l.pending++
	l.interest(c, syscall.EPOLLOUT)
	return false
}

// sendAside has a goroutine serve rest, the requests not served yet (the first must wait),
// with the replies not written yet (l.w); the loop leaves c alone until it comes back
// (takeBack). fromIn says that rest is in c.in's storage.
func (l *loop) sendAside(c *loopConn, rest []byte, fromIn bool) {
	// c.out is empty: a connection with pending replies is not read, so serves nothing.
	if fromIn {
		c.in = c.in[:copy(c.in[:cap(c.in)], rest)]
	} else {
		var err error
		if c.in, err = l.s.keepRequest(c.cn, c.in, rest); err != nil {
			l.refuse(c, err)
			return
		}
	}
	c.away = true
	a, _ := l.s.asides.Get().(*aside)
	if a == nil {
		a = &aside{argv: make([][]byte, 0, 16)}
	}
	a.w.SetProto(l.w.Proto())
	a.w.Raw(l.w.Bytes())
	l.w.Reset()
	l.s.wg.Add(1)
	l.s.goAside(func() { l.serveAside(c, a) })
}

// serveAside is the goroutine of sendAside: it serves c.in's complete requests with
// NoWait off, up to flushAt bytes of replies, and gives c back to its loop. Meanwhile
// the loop does not touch c; if the loop has closed, the goroutine closes c itself.
func (l *loop) serveAside(c *loopConn, a *aside) {
	defer l.s.wg.Done()
	c.sess.NoWait = false
	c.h.Touch(time.Now().UnixMilli())
	// Past flushAt it stops: the loop writes, and serves the rest once they are out.
	a.r = l.s.serveBatch(c.sess, c.h, &a.w, c.in, &a.argv, func() bool { return false })
	c.sess.NoWait = true
	c.aside = a
	l.mu.Lock()
	if !l.closed {
		l.back = append(l.back, c)
		l.nBack.Add(1)
		if l.sleeping.Load() {
			one := [8]byte{1}
			_, _ = syscall.Write(l.wakefd, one[:])
		}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	_, _ = writeFD(c.fd, a.w.Bytes())
	_ = syscall.Close(c.fd)
	l.s.forget(c.cn)
}

// takeBack takes back the connections served aside: it writes their replies, and serves
// what they hold once those are out, as writable does.
func (l *loop) takeBack(now time.Time) {
	l.mu.Lock()
	l.taking = append(l.taking[:0], l.back...)
	clear(l.back)
	l.back = l.back[:0]
	l.nBack.Store(0)
	l.mu.Unlock()
	for i, c := range l.taking {
		l.taking[i] = nil
		l.resume(c, now)
	}
}

// unarm takes c, away, out of the epoll set, so that its events wait for its return.
func (l *loop) unarm(c *loopConn) {
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil); err != nil {
		l.s.log.Warn("event loop: epoll_ctl del", "error", err)
	}
	c.unarmed = true
}

// resume carries on with c, back from serveAside, from what the goroutine did.
func (l *loop) resume(c *loopConn, now time.Time) {
	a := c.aside
	c.aside, c.away = nil, false
	l.s.handBacks.Add(1)
	c.lastRead, c.proto = now, a.w.Proto()
	r := a.r
	c.in = c.in[:copy(c.in, c.in[r.off:])]
	l.w.Reset()
	l.w.SetProto(c.proto)
	l.w.Raw(a.w.Bytes())
	a.w.Reset()
	clear(a.argv[:cap(a.argv)])
	a.argv = a.argv[:0]
	if cap(a.w.Bytes()) <= 2*flushAt { // a writer grown by a huge reply is dropped
		l.s.asides.Put(a)
	}
	if c.unarmed {
		c.unarmed = false
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(c.fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			l.s.log.Warn("event loop: epoll_ctl add", "error", err)
			l.w.Reset()
			l.close(c)
			return
		}
	}
	switch {
	case c.cn.evicted.Load(): // while away: the sweep that was told left it
		l.w.Reset()
		l.close(c)
		return
	case r.stop == stopError:
		l.refuse(c, r.err)
		return
	}
	if !l.write(c, now) || !l.flushPushes(c, now) { // pending: writable goes on once they are out
		return
	}
	switch {
	case c.sess.Quit:
		l.close(c)
	case r.stop == stopFull: // complete requests are left
		now = time.Now()
		c.h.Touch(now.UnixMilli())
		l.serve(c, c.in, true, now)
	default:
		c.in = l.s.releaseRequest(c.cn, c.in, false)
	}
}

// writable sends c's pending replies; once they are out, it serves what c.in holds and
// reads c again.
func (l *loop) writable(c *loopConn, now time.Time) {
	n, err := writeFD(c.fd, c.out)
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		l.close(c)
		return
	}
	if n < len(c.out) {
		c.out = c.out[:copy(c.out, c.out[max(n, 0):])]
		if n > 0 {
			c.outSince = now // WriteTimeout counts from the last progress
		}
		return
	}
	c.out = c.out[:0]
	if cap(c.out) > flushAt {
		c.out = nil
	}
	l.pending--
	if !l.interest(c, syscall.EPOLLIN|syscall.EPOLLRDHUP) || !l.flushPushes(c, now) {
		return
	}
	if c.sess.Quit {
		l.close(c)
		return
	}
	if len(c.in) > 0 {
		now = time.Now() // these requests are decided now, not at their read
		c.h.Touch(now.UnixMilli())
		l.serve(c, c.in, true, now)
	}
}

// interest sets the events c waits for; on failure it closes c and reports false.
func (l *loop) interest(c *loopConn, events uint32) bool {
	ev := syscall.EpollEvent{Events: events, Fd: int32(c.fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		l.close(c)
		return false
	}
	return true
}

// sweep closes the connections whose time is up (see the loop's Timers) and those
// evicted from MaxQueryBuffer.
func (l *loop) sweep(now time.Time) {
	cfg := &l.s.cfg
	for _, c := range l.conns {
		if c.away { // its goroutine has it; resume looks at eviction
			continue
		}
		reason := nReasons
		switch {
		case c.cn.evicted.Load(): // counted when it was chosen
			l.close(c)
			continue
		case len(c.out) > 0:
			// Progress is also the kernel sending what we queued (see unsentFD). The first
			// look cannot tell whether the queue shrank before it (a loop held up for
			// longer than WriteTimeout would drop a client that read all along), so the
			// timeout counts again from it.
			if q, ok := unsentFD(c.fd); ok {
				if c.outQ < 0 || q < c.outQ {
					c.outSince = now
				}
				c.outQ = q
			}
			if now.Sub(c.outSince) > cfg.WriteTimeout {
				reason = closeWriteTimeout
			}
		case len(c.in) > 0:
			if cfg.ReadTimeout > 0 && now.Sub(c.lastRead) > cfg.ReadTimeout {
				reason = closeReadTimeout
			}
		case cfg.IdleTimeout > 0 && now.Sub(c.lastRead) > cfg.IdleTimeout && !c.h.Internal():
			reason = closeIdleTimeout
		}
		if reason != nReasons {
			l.s.logClose(reason, c.sess.Addr, nil)
			l.close(c)
		}
	}
}

// refuse closes c for the protocol error err, after answering what was served so far and
// err.
func (l *loop) refuse(c *loopConn, err error) {
	l.s.countRefusal(c.cn, err)
	l.w.Error("ERR " + err.Error())
	if len(c.out) == 0 {
		_, _ = writeFD(c.fd, l.w.Bytes())
	}
	l.w.Reset()
	l.close(c)
}

func (l *loop) close(c *loopConn) {
	if _, ok := l.conns[int32(c.fd)]; !ok {
		return
	}
	if len(c.out) > 0 {
		l.pending--
	}
	delete(l.conns, int32(c.fd))
	_ = syscall.Close(c.fd) // also leaves the epoll set
	l.s.forget(c.cn)
}

// closeAll writes what each connection has pending, without waiting, and closes it.
func (l *loop) closeAll() {
	l.takeAdded()
	for _, c := range l.conns {
		if c.away { // its goroutine's, until it is given back below or closes it itself
			continue
		}
		if len(c.out) > 0 {
			_, _ = writeFD(c.fd, c.out)
		}
		l.close(c)
	}
	l.mu.Lock()
	l.closed = true // from now on a connection served aside closes itself
	_ = syscall.Close(l.epfd)
	_ = syscall.Close(l.wakefd)
	back := l.back
	l.back = nil
	l.mu.Unlock()
	for _, c := range back {
		_, _ = writeFD(c.fd, c.aside.w.Bytes())
		_ = syscall.Close(c.fd)
		l.s.forget(c.cn)
	}
	l.takeAdded() // any that came meanwhile; closed by the next line's loop
	for _, c := range l.conns {
		if !c.away {
			l.close(c)
		}
	}
}

func readFD(fd int, p []byte) (int, error)  { return retryEINTR(rawRead, fd, p) }
func writeFD(fd int, p []byte) (int, error) { return retryEINTR(rawWrite, fd, p) }

// yieldEvery is how often a busy loop gives its thread up (run). The loop itself then
// waits in the global run queue, behind what this thread's queue holds, until a thread
// takes it: at worst behind a CPU-bound goroutine's run (a save's shard, a slice of the
// background load), which the readied loop would have waited for anyway. Every round cost
// about a tenth more CPU per request (bench/compare.sh against the commit before: a
// Gosched takes the scheduler's lock, and at -P 1 a round serves a few requests); every
// millisecond, none. First 400k requests after a 10M restart from the same files, six
// interleaved pairs: 7.4 to 9.5 ms against 8.0 to 12.8 ms without.
const yieldEvery = time.Millisecond

// wait returns the loop's ready events. It first asks without blocking and without telling
// the Go scheduler (a raw system call, which cannot block); only when nothing is ready does
// it block in a system call the scheduler knows of, which may hand the loop's P to others,
// and only then may a connection given back wake it (sleeping).
func (l *loop) wait(timeout int) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	if e == 0 && r > 0 {
		return int(r), nil
	}
	l.sleeping.Store(true)
	defer l.sleeping.Store(false)
	if l.nBack.Load() > 0 { // given back before sleeping was set: no wake-up is coming
		return 0, nil
	}
	return syscall.EpollWait(l.epfd, l.events, timeout)
}

// rawRead and rawWrite work on non-blocking sockets, which never block: a raw system call
// spares the scheduler's bookkeeping of a call that might.
func rawRead(fd int, p []byte) (int, error) { return rawRW(syscall.SYS_READ, fd, p) }

func rawWrite(fd int, p []byte) (int, error) { return rawRW(syscall.SYS_WRITE, fd, p) }

func rawRW(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	r, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// retryEINTR runs a read or write again when a signal interrupted it, and reports a
// failed call as 0 bytes.
func retryEINTR(op func(int, []byte) (int, error), fd int, p []byte) (int, error) {
	for {
		n, err := op(fd, p)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return max(n, 0), err
	}
}

// loopsAvailable reports whether this platform has event loops.
func loopsAvailable() bool { return true }
