package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// An edge's RL.RESET: the tuples go to their origins (rendezvous hashing, as every tuple),
// one RL.INTERNAL.RESET per origin, and the edge applies the origins' changes before it
// answers, so that this edge's next request already sees the reset. The other edges learn
// it from the change feed (changes.go).

// ErrResetUnanswered is the error of a reset an origin did not answer: it may or may not
// have been made. Its text is the client's reply.
var ErrResetUnanswered = errors.New("TRYAGAIN the origin did not answer the reset")

// Reset resets tuples ts on their origins and returns how many held usage. ctx bounds the
// calls, each also bounded by callTimeout. An origin's error reply (engine.ErrTooManyResets)
// is returned as its text; an origin that does not answer gives ErrResetUnanswered (the
// tuples of the other origins are reset all the same).
func (e *Edge) Reset(ctx context.Context, ts []engine.Tuple) (int, error) {
	byLink := make(map[*originLink][][]byte, 1)
	for _, t := range ts {
		k := engine.AppendKey(nil, t)
		l := e.link(k)
		byLink[l] = append(byLink[l], k)
	}
	n := 0
	var firstErr error
	for l, keys := range byLink {
		m, err := e.resetOn(ctx, l, keys)
		n += m
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return n, firstErr
}

// resetOn resets keys on l's origin, then catches up with its changes.
func (e *Edge) resetOn(ctx context.Context, l *originLink, keys [][]byte) (int, error) {
	ro, ok := l.client.(engine.ResetOrigin)
	if !ok {
		return 0, fmt.Errorf("ERR the origin %s cannot reset tuples", l.id)
	}
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	start := time.Now()
	n, err := ro.Reset(call, keys)
	cancel()
	e.observe(l, "reset", err, start)
	if err != nil {
		var se interface{ ServerMessage() string }
		if errors.As(err, &se) {
			return 0, errors.New(se.ServerMessage())
		}
		l.failedUnder(ctx, e.clock.NowMs(), err)
		return 0, fmt.Errorf("%w: %v", ErrResetUnanswered, err)
	}
	if co, ok := l.client.(engine.ChangesOrigin); ok {
		e.catchUp(ctx, l, co)
	}
	return n, nil
}
