package edge

import (
	"context"
	"errors"
	"time"

	"github.com/ratchet/ratchet/keyspace"
)

// Forwarder is an Origin that also runs commands for an edge's clients: the commands
// whose state only an origin holds (the counter keyspace, CL.THROTTLE, the limiter
// scripts). upstream.Client is one.
type Forwarder interface {
	// Forward runs the commands of args (an opaque encoding, the caller's) for a client of
	// workspace ws speaking RESP proto, and returns their reply, encoded for that client.
	Forward(ctx context.Context, proto int, ws string, args [][]byte) ([]byte, error)
}

// ErrNoForward is returned by Edge.Forward when the origin of the key cannot run
// forwarded commands.
var ErrNoForward = errors.New("the origin cannot run forwarded commands")

// Forward has the origin of key (in workspace ws, placed by rendezvous hashing as the
// tuples are) run a command for a client, waiting at most callTimeout or until ctx ends.
// Nothing of it is kept at the edge: the origin decides, and its reply is the client's.
func (e *Edge) Forward(ctx context.Context, ws string, key []byte, proto int, args [][]byte) ([]byte, error) {
	var buf [256]byte
	return e.forwardTo(ctx, e.link(keyspace.AppendKVKey(buf[:0], ws, key)), ws, proto, args) // as the keyspace names it
}

// forwardTo has l's origin run a command for a client, as Forward.
func (e *Edge) forwardTo(ctx context.Context, l *originLink, ws string, proto int, args [][]byte) ([]byte, error) {
	f, ok := l.client.(Forwarder)
	if !ok {
		return nil, ErrNoForward
	}
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	defer cancel()
	start := time.Now()
	raw, err := f.Forward(ctx, proto, ws, args)
	e.observe(l, "forward", err, start)
	return raw, err
}
