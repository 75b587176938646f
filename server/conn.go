package server

import (
	"context"

	"github.com/ratchet/ratchet/resp"
)

// Handler serves a server's connections: Open returns its state for each new one.
type Handler interface {
	// Open returns the state of the new connection c, whose first instant is nowMs.
	Open(c *Conn, nowMs int64) Session
}

// Session is a Handler's state of one connection, served from one goroutine (or event
// loop) at a time.
type Session interface {
	// Serve serves one request, appending its reply to w.
	Serve(w *resp.Writer, args [][]byte)
	// Touch records the instant (ms) of the request batch about to be served.
	Touch(nowMs int64)
	// Proto is the RESP version the replies use (2 or 3).
	Proto() int
	// Internal reports a node-to-node connection, never closed for being idle.
	Internal() bool
	// Close releases the state once the connection is closed.
	Close()
}

// Conn is what the server and its Handler share of one connection.
type Conn struct {
	ID        int64
	Addr      string // the client's address
	LocalAddr string
	// CertVerified is set by the server once the TLS handshake verified a client
	// certificate against the listener's client CAs.
	CertVerified bool
	// NoWait is set by a server that serves the connection from an event loop: a request
	// that would wait on the network then writes nothing and sets WouldBlock, and the
	// server serves it once more, with the rest of its batch, from a goroutine with
	// NoWait off.
	NoWait     bool
	WouldBlock bool
	// Quit is set by the handler when the client asked to close the connection (QUIT):
	// the server writes the pending replies, then closes.
	Quit bool

	ctx    context.Context // Context's; nil for a Conn the server did not make
	cancel context.CancelFunc

	push outbox // bytes pushed from outside the connection's requests (push.go)
}

// Context returns the context of the connection's requests, for the calls they wait on
// (an edge's calls to its origin). It ends once the connection is closed, and as soon as
// its client hangs up while a request of an event loop's connection waits. A Conn the
// server did not make has context.Background().
func (c *Conn) Context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// end ends the connection's context.
func (c *Conn) end() {
	if c.cancel != nil {
		c.cancel()
	}
}

// ConnStats are the server's connection counters.
type ConnStats struct {
	Connected int
	Total     uint64
	Rejected  uint64
	Port      int
	HandBacks uint64 // batches an event loop had served from a goroutine, as a request had to wait

	// Connections the server closed, by reason.
	ReadTimeouts      uint64 // an incomplete request made no progress for --read-timeout
	IdleTimeouts      uint64 // idle longer than --timeout
	WriteTimeouts     uint64 // replies not read for --write-timeout
	HandshakeTimeouts uint64 // TLS handshake not finished in time
	QueryEvictions    uint64 // held the most request bytes when --max-query-buffer was full
	ProtocolErrors    uint64 // malformed or oversized requests
	PushCuts          uint64 // pushed messages not read past the bound (Config.PushLimit)

	QueryBufferBytes int64 // request bytes buffered across connections now
	MaxQueryBuffer   int64 // the --max-query-buffer budget
}
