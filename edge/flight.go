package edge

import (
	"context"
	"sync"
)

// flightGroup runs one call per key at a time; concurrent callers of the same key wait
// for it and share its result (the role of golang.org/x/sync/singleflight, in 20 lines).
// The call runs under its first caller's context; a waiter whose own context ends stops
// waiting, with a nil entry and its context's error.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	done chan struct{}
	le   *localEntry
	err  error
}

func (g *flightGroup) do(ctx context.Context, key string, fn func() (*localEntry, error)) (*localEntry, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*flightCall)
	}
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.le, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &flightCall{done: make(chan struct{})}
	g.calls[key] = c
	g.mu.Unlock()

	c.le, c.err = fn()
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
	close(c.done)
	return c.le, c.err
}
