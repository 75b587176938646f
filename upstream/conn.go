package upstream

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// maxKeptBuffer is the largest write buffer the writer keeps for reuse.
const maxKeptBuffer = 256 << 10

// writeTimeout bounds one write: an origin that does not read its requests for that long
// is treated as gone, and the connection fails rather than buffering without end.
const writeTimeout = 10 * time.Second

// replyTimeout bounds the wait for the next reply while requests are outstanding: an origin
// that reads its requests but answers none for that long (stopped, or cut off without a
// reset) is treated as gone, and the connection fails and is dialed again on the next
// call, instead of waiting for TCP keepalive. Callers give up long before (their ctx).
const replyTimeout = 5 * time.Second

type opKind uint8

const (
	opRead opKind = iota + 1
	opReplay
	opDecide
	opDecideMulti
	opForward
	opPublish // a peer origin's RL.INTERNAL.PUBLISH (package replication)
	opPing
	opChanges // RL.INTERNAL.CHANGES: a bulk reply, decoded by the reader
	opReset   // RL.INTERNAL.RESET
)

// call is one request in flight. See Client for who writes which field when.
type call struct {
	op   opKind
	done chan struct{} // capacity 1: the completer never blocks

	// Results, written by the completer before the send on done.
	err    error
	meta   engine.OriginMeta
	counts []engine.CellCounts // read, replay: allocated by the caller with Seq set; filled
	dec    engine.Decision     // decide
	cc     engine.CellCounts   // decide
	decs   []engine.Decision   // decide multi: allocated by the caller, with counts as long
	raw    []byte              // forward: the reply, encoded for the client
	chg    engine.ChangesReply // changes
	n      int                 // reset: the tuples that held usage; the request's keys before
}

// conn is one authenticated connection and its two goroutines. See Client for ownership.
type conn struct {
	c    *Client
	nc   net.Conn
	rr   *resp.ReplyReader // the reader goroutine's
	kick chan struct{}     // capacity 1: wakes the writer
	dead chan struct{}     // closed by fail

	mu      sync.Mutex
	err     error  // why the connection failed; non-nil once it did
	out     []byte // requests encoded and not yet taken by the writer
	pending fifo   // calls queued or sent, in wire order
	armed   bool   // a read deadline is set: requests are outstanding
}

func newConn(c *Client, nc net.Conn, rr *resp.ReplyReader) *conn {
	return &conn{c: c, nc: nc, rr: rr, kick: make(chan struct{}, 1), dead: make(chan struct{})}
}

// enqueue encodes cl's request with enc and queues it, or returns why the connection is
// unusable. A request encoding to more than MaxRequestBytes is refused with ErrTooLarge.
func (cn *conn) enqueue(cl *call, enc func([]byte) []byte) error {
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return err
	}
	start := len(cn.out)
	cn.out = enc(cn.out)
	if len(cn.out)-start > MaxRequestBytes {
		cn.out = cn.out[:start]
		cn.mu.Unlock()
		return ErrTooLarge
	}
	cn.pending.push(cl)
	cn.mu.Unlock()
	// When out was not empty, the writer was already woken for it and has not taken it
	// yet: it will take this request with it.
	if start == 0 {
		select {
		case cn.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// writeLoop is the writer goroutine: it writes whatever is queued, in one write, each
// time it is woken.
func (cn *conn) writeLoop() {
	defer cn.c.wg.Done()
	var spare []byte
	for {
		select {
		case <-cn.kick:
		case <-cn.dead:
			return
		}
		cn.mu.Lock()
		buf := cn.out
		cn.out = spare[:0]
		cn.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		err := cn.nc.SetWriteDeadline(time.Now().Add(cn.c.writeTimeout))
		if err == nil {
			_, err = cn.nc.Write(buf)
		}
		cn.c.writes.Add(1)
		if err != nil {
			cn.fail(fmt.Errorf("write: %w", err))
			return
		}
		// Requests are out: a reply must come within replyTimeout. Only the first
		// outstanding request arms the deadline; replies push it back (readLoop), later
		// writes do not, so an origin that takes requests and answers none still times out.
		cn.mu.Lock()
		if !cn.armed && cn.pending.size > 0 {
			err = cn.nc.SetReadDeadline(time.Now().Add(cn.c.replyTimeout))
			cn.armed = err == nil
		}
		cn.mu.Unlock()
		if err != nil {
			cn.fail(fmt.Errorf("set read deadline: %w", err))
			return
		}
		if cap(buf) > maxKeptBuffer {
			buf = nil
		}
		spare = buf
	}
}

// readLoop is the reader goroutine: it reads replies and completes the calls in order.
func (cn *conn) readLoop() {
	defer cn.c.wg.Done()
	var ints []int64
	for {
		rep, err := cn.rr.Read(ints)
		if err != nil {
			cn.fail(fmt.Errorf("read: %w", err))
			return
		}
		if rep.Kind == resp.IntsReply {
			ints = rep.Ints[:0] // keep its storage for the next reply
		}
		cn.mu.Lock()
		cl, ok := cn.pending.pop()
		var derr error
		switch {
		case cn.pending.size == 0 && cn.armed: // nothing outstanding: wait without end
			derr, cn.armed = cn.nc.SetReadDeadline(time.Time{}), false
		case cn.pending.size > 0: // progress: the next reply has replyTimeout again
			derr = cn.nc.SetReadDeadline(time.Now().Add(cn.c.replyTimeout))
		}
		cn.mu.Unlock()
		if derr != nil {
			cn.fail(fmt.Errorf("set read deadline: %w", derr))
			if ok {
				cn.c.complete(cl, connLost(derr))
			}
			return
		}
		if !ok {
			cn.fail(errProto("reply to no request"))
			return
		}
		if perr := cl.decode(rep); perr != nil {
			// Fail first: the connection is out of use before any caller hears of it.
			cn.fail(perr)
			cn.c.complete(cl, connLost(perr))
			return
		}
		cn.c.complete(cl, nil)
	}
}

// fail closes the connection for err (once) and fails every pending call with it.
func (cn *conn) fail(err error) {
	err = connLost(err)
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = err
	calls := cn.pending.drain()
	cn.out = nil
	cn.mu.Unlock()

	close(cn.dead)
	_ = cn.nc.Close()
	c := cn.c
	c.mu.Lock()
	if c.cur == cn {
		c.cur = nil
	}
	closing := c.closed
	c.mu.Unlock()
	if !closing {
		c.log.Warn("disconnected from "+c.role, "error", err, "failed_calls", len(calls))
	}
	for _, cl := range calls {
		c.complete(cl, err)
	}
}

// connLost is the error of calls failed by a connection failure.
func connLost(err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("connection lost: %w", err)
}

// fifo is a queue of calls in a ring buffer that grows by doubling.
type fifo struct {
	buf        []*call
	head, size int
}

func (q *fifo) push(cl *call) {
	if q.size == len(q.buf) {
		grown := make([]*call, max(16, 2*len(q.buf)))
		n := copy(grown, q.buf[q.head:])
		copy(grown[n:], q.buf[:q.head])
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = cl
	q.size++
}

func (q *fifo) pop() (*call, bool) {
	if q.size == 0 {
		return nil, false
	}
	cl := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return cl, true
}

// drain removes and returns every call, oldest first.
func (q *fifo) drain() []*call {
	out := make([]*call, 0, q.size)
	for {
		cl, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, cl)
	}
}
