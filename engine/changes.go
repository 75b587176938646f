package engine

import (
	"context"
	"sync"
	"sync/atomic"
)

// The change feed: what an origin tells its edges beside counts (docs/internal-protocol.md,
// "Change feed"). An origin numbers every change it makes to state edges cache (a reset
// now; overrides later) with a version that only grows, across restarts too, and keeps the
// last changeLogSize of them in a ring. Every reply's meta carries the current version
// (OriginMeta.Changes): an edge that sees one above what it has applied asks for the
// changes since (RL.INTERNAL.CHANGES) and applies them; one too far behind (the ring lost
// what it lacks) is told to resync, dropping every view and lease it holds of that origin.
//
// Concurrency: changeLog.mu guards the ring; version is also an atomic, so that building
// a reply's meta takes no lock. A change is in the ring before version says it exists.

// ChangeKind says what a Change does; an edge ignores kinds it does not know.
type ChangeKind uint8

// The kinds of change.
const (
	// ChangeReset zeroes the tuple Key (RL.RESET): an edge drops its views, pending cost and
	// lease of it. Fields: none.
	ChangeReset ChangeKind = 1
	// ChangeRefresh makes an edge re-read the tuple Key: it drops its counts of it, not
	// its lease nor the cost it accepted (a reset of another region lowered the counts,
	// reset.go). Fields: none.
	ChangeRefresh ChangeKind = 2
)

// MaxChangeFields bounds a Change's Fields.
const MaxChangeFields = 8

// Change is one entry of an origin's change feed: kind Kind applied to Key (a tuple key
// made by AppendKey, or what Kind says), with Kind's integer Fields.
type Change struct {
	Version uint64
	Kind    ChangeKind
	Key     []byte
	Fields  []int64
}

// changeLogSize is how many changes an origin keeps for edges that are behind.
const changeLogSize = 4096

// changeLog is an origin's ring of recent changes.
type changeLog struct {
	mu      sync.Mutex
	version atomic.Uint64 // the last version handed out
	ring    []Change      // the last len(ring) changes, oldest at start
	start   int
	// floor is the highest version no longer in the ring: an edge that has applied less
	// than floor has missed changes and must resync.
	floor uint64
}

// init starts the log of a run of the origin: restored is the version its snapshot holds
// (0: none), base a number above every version an earlier run handed out (its boot time
// x 2^20). An edge that has applied less than restored missed changes this run does not
// list (they are in its snapshot): it resyncs. One that applied more than restored but
// less than base applied changes the crash lost, as the counts were lost: it goes on.
func (l *changeLog) init(restored, base uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.floor = max(l.floor, restored)
	l.version.Store(max(l.version.Load(), restored, base))
}

// add appends a change of kind to key and returns its version. key is copied.
func (l *changeLog) add(kind ChangeKind, key []byte, fields []int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.version.Load() + 1
	c := Change{Version: v, Kind: kind, Key: append([]byte(nil), key...), Fields: append([]int64(nil), fields...)}
	if len(l.ring) < changeLogSize {
		l.ring = append(l.ring, c)
	} else {
		l.floor = l.ring[l.start].Version
		l.ring[l.start] = c
		l.start = (l.start + 1) % len(l.ring)
	}
	l.version.Store(v)
	return v
}

// since returns up to max changes above version since, oldest first, and the current
// version. resync is true when since is below what the ring still holds, or above the
// current version (an edge that heard of another numbering): the edge must drop every
// view it holds of this origin and start from version.
func (l *changeLog) since(since uint64, max int) (out []Change, version uint64, resync bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	version = l.version.Load()
	if since < l.floor || since > version {
		return nil, version, true
	}
	for i := range l.ring {
		c := l.ring[(l.start+i)%len(l.ring)]
		if c.Version <= since {
			continue
		}
		if len(out) == max {
			return out, out[len(out)-1].Version, false // more remain: the asker asks again
		}
		out = append(out, c)
	}
	return out, version, false
}

// MaxChangesPerReply is the most changes one RL.INTERNAL.CHANGES reply carries; an edge
// asks again from the last one it got.
const MaxChangesPerReply = 256

// ChangesSince returns the changes after version since (at most MaxChangesPerReply,
// oldest first), the version the asker is at once it applied them, and whether it must
// resync (it missed changes the log no longer holds). node is the asking edge run: it
// counts as heard.
func (e *Engine) ChangesSince(node string, since uint64) ChangesReply {
	if node != "" {
		e.Heard(node)
	}
	out, version, resync := e.changes.since(since, MaxChangesPerReply)
	return ChangesReply{Version: version, Resync: resync, Changes: out}
}

// ChangeVersion returns the version of the last change this origin made.
func (e *Engine) ChangeVersion() uint64 { return e.changes.version.Load() }

// AddChange records a change of kind to key in the feed and returns its version. Package
// engine records its own (resets); it is exported for the kinds other packages add.
func (e *Engine) AddChange(kind ChangeKind, key []byte, fields []int64) uint64 {
	v := e.changes.add(kind, key, fields)
	e.markDirty() // the version is saved with the snapshot
	return v
}

// ChangesReply is an origin's answer to an edge's request for its changes.
type ChangesReply struct {
	// Version is the version the edge has applied once it has applied Changes: the
	// origin's current one, or the last of Changes when more remain (the edge asks again).
	Version uint64
	// Resync: the edge missed changes the origin no longer holds; it drops every view and
	// lease it has of this origin's tuples, and starts from Version.
	Resync  bool
	Changes []Change
}

// ChangesOrigin is an Origin that serves the change feed (upstream.Client, LocalOrigin).
// An Origin without it gives its edges no changes.
type ChangesOrigin interface {
	Changes(ctx context.Context, since uint64) (ChangesReply, error)
}

// Changes implements ChangesOrigin.
func (o LocalOrigin) Changes(_ context.Context, since uint64) (ChangesReply, error) {
	return o.Engine.ChangesSince(o.Node, since), nil
}
