//go:build linux

package server

import "time"

// An event loop's side of pushes (push.go): a connection it owns is announced on the
// loop's push queue and the loop woken; the loop writes the outboxes at the top of its
// next iteration, and at the end of each batch before the batch's held replies (as
// redis-server writes a message its command pushed before that command's reply) but
// after the held replies of the pushed connection itself.

// pushedConn is a connection announced on a loop's push queue, for its outbox's turn gen.
type pushedConn struct {
	c   *loopConn
	gen uint64
}

// ownPushes makes the loop the owner of c's pushes (the loop's goroutine, once c is in
// its table).
func (l *loop) ownPushes(c *loopConn) {
	c.pushGen = c.sess.push.own(func(gen uint64) { l.announce(c, gen) })
}

// announce queues c's outbox for the loop and wakes it; any goroutine may call it.
func (l *loop) announce(c *loopConn, gen uint64) {
	l.mu.Lock()
	first := len(l.pushq) == 0
	l.pushq = append(l.pushq, pushedConn{c: c, gen: gen})
	l.nPushed.Store(int32(len(l.pushq)))
	l.mu.Unlock()
	if first {
		l.wake()
	}
}

// takePushed writes the outboxes of the connections announced since the last call. A
// connection whose socket has replies pending gets its pushes once they drain (writable);
// one cut for its bound is closed.
func (l *loop) takePushed(now time.Time) {
	l.mu.Lock()
	q := l.pushq
	l.pushq = nil
	l.nPushed.Store(0)
	l.mu.Unlock()
	for _, p := range q {
		c := p.c
		if l.conns[int32(c.fd)] != c || p.gen != c.pushGen {
			continue
		}
		if c.away { // its goroutine's replies go first: resume writes the pushes after them
			continue
		}
		if c.holding { // after the replies it was served before the push
			l.later = append(l.later, p)
			continue
		}
		if len(c.out) > 0 {
			if c.sess.push.isCut() {
				l.s.closeCut(c.cn)
				l.close(c)
			}
			continue
		}
		l.flushPushes(c, now)
	}
}

// pushAfterHeld writes the pushes left by takePushed for after their connection's held
// replies, which writeHeld has just written.
func (l *loop) pushAfterHeld(now time.Time) {
	for i, p := range l.later {
		l.later[i] = pushedConn{}
		if c := p.c; l.conns[int32(c.fd)] == c && p.gen == c.pushGen && !c.away && len(c.out) == 0 {
			l.flushPushes(c, now)
		}
	}
	l.later = l.later[:0]
}

// flushPushes writes c's outbox; what the socket does not take waits in c.out. It reports
// false when c now has bytes pending or was closed.
func (l *loop) flushPushes(c *loopConn, now time.Time) bool {
	b, cut, ok := c.sess.push.take(c.pushGen)
	switch {
	case !ok || len(b) == 0 && !cut:
		return true
	case cut:
		l.s.closeCut(c.cn)
		l.close(c)
		return false
	}
	return l.send(c, b, now)
}
