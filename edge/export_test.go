package edge

import (
	"context"

	"github.com/ratchet/ratchet/engine"
)

// Test doors for the black-box tests (package edge_test); they are no part of the API.

// FlushOnce runs one replay flush of every origin link, exactly as one tick of Run's
// flusher does (backoff included). It reports whether more may remain. Test hook.
func (e *Edge) FlushOnce() (more bool) {
	for _, l := range e.links {
		if e.flush(context.Background(), l, false) {
			more = true
		}
	}
	return more
}

// Heartbeat sends every origin link the heartbeat Run's flusher sends to an idle origin
// (an empty read, which also tells the edge the origin's run and durable mark). Test hook.
func (e *Edge) Heartbeat() {
	for _, l := range e.links {
		e.heartbeat(context.Background(), l)
	}
}

// OriginFor returns the ID of the origin that owns tuple t.
func (e *Edge) OriginFor(t engine.Tuple) string { return e.link(engine.AppendKey(nil, t)).id }

// CatchUpChanges has every origin link fetch and apply the origin's changes, as Run's
// changes loop does when an answer shows it behind. Test hook.
func (e *Edge) CatchUpChanges() {
	for _, l := range e.links {
		if co, ok := l.client.(engine.ChangesOrigin); ok {
			e.catchUp(context.Background(), l, co)
		}
	}
}
