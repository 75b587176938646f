package commands

import (
	"container/heap"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// CLIENT TRACKING, as Redis 7.0 serves it: a client that caches replies is told when a
// key it read may have changed, so that it never reads a stale value from its cache.
//
//   - Default mode: the keys a tracking connection reads (the keys of a read-only command)
//     are remembered with its ID; a write to one of them sends each remembered connection
//     one invalidation of that key and forgets them (Redis's tracking table). OPTIN
//     remembers only after CLIENT CACHING yes, OPTOUT all but after CLIENT CACHING no, for
//     the next command (a whole MULTI ... EXEC).
//   - BCAST: nothing is remembered; every write to a key under one of the connection's
//     prefixes (none: every key) sends it the written keys.
//   - NOLOOP: a connection is not told of its own writes.
//   - RESP3 gets `>2 invalidate [keys]` pushes; REDIRECT id sends them to another
//     connection instead: a RESP3 one as pushes, a RESP2 one with a subscription as
//     messages of channel __redis__:invalidate (pubsub.go). A redirect to a connection
//     that has gone marks tracking broken, as Redis does.
//   - A key whose TTL passes is invalidated as Redis invalidates an expired key: the
//     tracking table keeps each remembered key's expiry (and, for BCAST, the expiry of
//     each written key under a prefix) and a timer invalidates them once it has passed.
//   - A flush (invalidateAll) sends every tracking connection of the workspace a null
//     invalidation and forgets its keys.
//   - The table holds at most Options.TrackingMaxKeys keys (Redis's
//     tracking-table-max-keys): remembering one more first evicts one, invalidating it.
//
// Where: the hooks sit in the commands layer, where every command names its keys: a
// read-only command's keys are remembered inside its KV.Do (keys locked), so a write
// cannot fall between the read and the remembering; a write command's keys (a script's:
// all its KEYS) are invalidated inside the write's KV.Do. An invalidation to another
// connection goes through its outbox (server.Conn.Push), which is written after the
// replies that connection was already served: a cached value is always followed by the
// invalidation of any later write. An invalidation of the connection's own write comes
// after that command's reply, as from Redis.
//
// Tracking is per workspace: a key is a workspace's key, and a connection hears only of
// keys of its own workspace. An edge refuses CLIENT TRACKING ON: the keys are its origin's.
//
// Concurrency: tracker.mu guards the table, the broadcast prefixes and the expiry heap; the
// sessions by ID have their own lock (sessions, registered at Open). Lock order: a KV
// shard, then tracker.mu, then pubsub.mu or sessions.mu, then a connection's outbox.
// A Session's tracking options are an immutable *trackState swapped atomically.

// DefaultTrackingMaxKeys is the tracking table's default bound, Redis's.
const DefaultTrackingMaxKeys = 1_000_000

// Replies of CLIENT TRACKING and CLIENT CACHING, Redis's.
const (
	errTrackPrefixBcast = "ERR PREFIX option requires BCAST mode to be enabled"
	errTrackSwitchBcast = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
	errTrackBcastOpt    = "ERR OPTIN and OPTOUT are not compatible with BCAST"
	errTrackBothOpt     = "ERR You can't specify both OPTIN mode and OPTOUT mode"
	errTrackSwitchOpt   = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
	errTrackRedirTwice  = "ERR A client can only redirect to a single other client"
	errTrackNoRedir     = "ERR The client ID you want redirect to does not exist"
	errCachingNoTrack   = "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
	errCachingYes       = "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
	errCachingNo        = "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
	errTrackingOnEdge   = "ERR CLIENT TRACKING is served by the origin only: the keys are the origin's, and an edge is not told " +
		"of their writes; connect to the origin to cache with tracking (or turn the client's cache off)"
)

// trackState is a connection's tracking options while tracking is on.
type trackState struct {
	bcast, optin, optout, noloop bool
	redirect                     int64
	prefixes                     []string // BCAST's; "" is every key
}

// tracker is a Dispatcher's tracking table.
type tracker struct {
	max     int
	clients atomic.Int64 // connections with tracking on: 0 skips every hook

	mu     sync.Mutex
	keys   map[string]*trackedKey                      // by wsKey
	bcast  map[string]map[string]map[*Session]struct{} // workspace -> prefix -> connections
	bexp   map[string]int64                            // BCAST: written keys' expiry, by wsKey
	exp    expHeap
	timer  *time.Timer
	timeAt int64 // when timer fires (ms); 0: not armed

	sessMu   sync.Mutex
	sessions map[int64]*Session // every open connection, for REDIRECT and for invalidations by ID

	nowMs func() int64 // the keyspace's clock, which expiries are read from
}

// trackedKey is one key of the table: the connections that read it, and its expiry when
// it was last read (ms; 0: none).
type trackedKey struct {
	ids      map[int64]struct{}
	expireAt int64
}

func newTracker(max int, clock engine.Clock) *tracker {
	if max <= 0 {
		max = DefaultTrackingMaxKeys
	}
	nowMs := func() int64 { return time.Now().UnixMilli() }
	if clock != nil {
		nowMs = clock.NowMs
	}
	return &tracker{max: max, keys: map[string]*trackedKey{}, bcast: map[string]map[string]map[*Session]struct{}{},
		bexp: map[string]int64{}, sessions: map[int64]*Session{}, nowMs: nowMs}
}

// wsKey is a workspace's key in the table.
func wsKey(ws string, key []byte) string { return ws + "\x00" + string(key) }

func splitWsKey(k string) (ws, key string) {
	i := strings.IndexByte(k, 0)
	return k[:i], k[i+1:]
}

func (t *tracker) open(s *Session) {
	t.sessMu.Lock()
	t.sessions[s.ID] = s
	t.sessMu.Unlock()
}

// close forgets a closed connection: its registration, its tracking, its subscriptions.
func (t *tracker) close(s *Session) {
	t.off(s)
	t.sessMu.Lock()
	delete(t.sessions, s.ID)
	t.sessMu.Unlock()
}

func (t *tracker) session(id int64) *Session {
	t.sessMu.Lock()
	defer t.sessMu.Unlock()
	return t.sessions[id]
}

// off turns s's tracking off. Its keys stay in the table until written, as in Redis, and
// are then skipped.
func (t *tracker) off(s *Session) {
	ts := s.track.Swap(nil)
	if ts == nil {
		return
	}
	t.clients.Add(-1)
	if ts.bcast {
		t.mu.Lock()
		for _, p := range ts.prefixes {
			t.removePrefixLocked(s, p)
		}
		t.mu.Unlock()
	}
}

func (t *tracker) removePrefixLocked(s *Session, p string) {
	byPrefix := t.bcast[s.Workspace]
	if set := byPrefix[p]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(byPrefix, p)
		}
	}
	if len(byPrefix) == 0 {
		delete(t.bcast, s.Workspace)
	}
}

// on turns s's tracking on with ts (prefixes already checked), as Redis's enableTracking:
// BCAST's prefixes add to those s had.
func (t *tracker) on(s *Session, ts *trackState) {
	old := s.track.Load()
	if old == nil {
		t.clients.Add(1)
	}
	if ts.bcast {
		if len(ts.prefixes) == 0 {
			ts.prefixes = []string{""}
		}
		t.mu.Lock()
		if old != nil {
			ts.prefixes = mergePrefixes(old.prefixes, ts.prefixes)
		}
		byPrefix := t.bcast[s.Workspace]
		if byPrefix == nil {
			byPrefix = map[string]map[*Session]struct{}{}
			t.bcast[s.Workspace] = byPrefix
		}
		for _, p := range ts.prefixes {
			if byPrefix[p] == nil {
				byPrefix[p] = map[*Session]struct{}{}
			}
			byPrefix[p][s] = struct{}{}
		}
		t.mu.Unlock()
	}
	s.trackBroken.Store(false)
	s.track.Store(ts)
}

func mergePrefixes(old, add []string) []string {
	out := append([]string(nil), old...)
	for _, p := range add {
		dup := false
		for _, o := range old {
			dup = dup || o == p
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

// keyExpiry reads the expiry of a keyspace step's key i (ms since the epoch; 0: none).
type keyExpiry interface {
	ExpireAt(i int) (int64, bool)
}

// tracked is the hook of a keyspace command that ran: a read-only command's keys are
// remembered for s, a write's (and a script's) invalidated. It runs inside the command's
// KV.Do, whose key base is the command's first; cheap while no connection tracks.
func (d *Dispatcher) tracked(s *Session, name string, keys [][]byte, tx keyExpiry, base int) {
	t := d.track
	if t.clients.Load() == 0 {
		return
	}
	if name == "flushall" || name == "flushdb" { // every key: a null invalidation
		t.invalidateAll(s, s.Workspace)
		return
	}
	if len(keys) == 0 {
		return
	}
	cmd := d.table[name]
	if cmd == nil {
		return
	}
	expiry := func(i int) int64 {
		at, _ := tx.ExpireAt(base + i)
		return at
	}
	switch {
	case cmd.Flags&flagReadonly != 0:
		t.remember(s, keys, expiry)
	case cmd.Flags&flagWrite != 0:
		t.invalidate(s, s.Workspace, keys, expiry)
	}
}

// remember records that s read keys (default mode; OPTIN/OPTOUT as CLIENT CACHING says).
// A BCAST connection's read of a key with a TTL under one of its prefixes schedules the
// key's expiry invalidation (a key written before the prefix was, with a TTL, is told of
// when it expires once read).
func (t *tracker) remember(s *Session, keys [][]byte, expiry func(int) int64) {
	ts := s.track.Load()
	if ts != nil && ts.bcast {
		t.rememberExpiry(s.Workspace, ts, keys, expiry)
		return
	}
	if ts == nil || (ts.optin && !s.caching) || (ts.optout && s.caching) {
		return
	}
	var evicted []sendTo
	t.mu.Lock()
	for i, key := range keys {
		k := wsKey(s.Workspace, key)
		e := t.keys[k]
		if e == nil {
			for len(t.keys) >= t.max {
				evicted = t.evictLocked(evicted)
			}
			e = &trackedKey{ids: map[int64]struct{}{}}
			t.keys[k] = e
		}
		e.ids[s.ID] = struct{}{}
		if at := expiry(i); at != e.expireAt {
			e.expireAt = at
			if at > 0 {
				t.scheduleLocked(k, at, false)
			}
		}
	}
	t.mu.Unlock()
	t.sendAll(s, evicted)
}

// rememberExpiry schedules the broadcast of the expiry of the keys with a TTL under one
// of ts's prefixes.
func (t *tracker) rememberExpiry(ws string, ts *trackState, keys [][]byte, expiry func(int) int64) {
	for i, key := range keys {
		at := expiry(i)
		if at == 0 || !underPrefix(ts.prefixes, key) {
			continue
		}
		k := wsKey(ws, key)
		t.mu.Lock()
		early := t.expireLaterLocked(k, at, nil)
		t.mu.Unlock()
		t.broadcastNow(early)
	}
}

// expireLaterLocked has k's expiry at broadcast once it passes. The broadcast expiries
// are bounded like the table: past it, one other key's is dropped, and appended to early
// (its wsKey) for the caller to broadcast now, which only costs its readers a cache miss.
func (t *tracker) expireLaterLocked(k string, at int64, early []string) []string {
	old, had := t.bexp[k]
	if had && old == at {
		return early
	}
	if !had && len(t.bexp) >= t.max {
		for other := range t.bexp {
			delete(t.bexp, other)
			early = append(early, other)
			break
		}
	}
	t.bexp[k] = at
	t.scheduleLocked(k, at, true)
	return early
}

// broadcastNow sends the BCAST invalidations of keys (wsKeys).
func (t *tracker) broadcastNow(keys []string) {
	for _, k := range keys {
		ws, key := splitWsKey(k)
		t.invalidate(nil, ws, [][]byte{[]byte(key)}, nil)
	}
}

func underPrefix(prefixes []string, key []byte) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(string(key), p) {
			return true
		}
	}
	return false
}

// sendTo is an invalidation of one key for the connection id.
type sendTo struct {
	id  int64
	key string // the key, without its workspace
}

// evictLocked drops one key of the table (the first a map walk meets: Redis picks at
// random too) and returns out with its invalidations.
func (t *tracker) evictLocked(out []sendTo) []sendTo {
	for k, e := range t.keys {
		delete(t.keys, k)
		_, key := splitWsKey(k)
		for id := range e.ids {
			out = append(out, sendTo{id, key})
		}
		break
	}
	return out
}

// invalidate tells the connections tracking keys of workspace ws that by (nil: the
// server itself) wrote them. expiry gives each key's expiry after the write (nil: none).
func (t *tracker) invalidate(by *Session, ws string, keys [][]byte, expiry func(int) int64) {
	var sends []sendTo
	var bsends map[bcastTo][][]byte
	var early []string
	t.mu.Lock()
	for i, key := range keys {
		k := wsKey(ws, key)
		if e := t.keys[k]; e != nil {
			delete(t.keys, k)
			for id := range e.ids {
				sends = append(sends, sendTo{id, string(key)})
			}
		}
		byPrefix := t.bcast[ws]
		if len(byPrefix) == 0 {
			continue
		}
		matched := false
		for p, set := range byPrefix {
			if !strings.HasPrefix(string(key), p) {
				continue
			}
			matched = true
			for sub := range set {
				if ts := sub.track.Load(); ts != nil && ts.noloop && sub == by {
					continue
				}
				if bsends == nil {
					bsends = map[bcastTo][][]byte{}
				}
				to := bcastTo{sub, p}
				bsends[to] = append(bsends[to], key)
			}
		}
		if at := int64(0); matched && expiry != nil {
			if at = expiry(i); at > 0 {
				early = t.expireLaterLocked(k, at, early)
			} else {
				delete(t.bexp, k)
			}
		}
	}
	t.mu.Unlock()
	t.broadcastNow(early)
	t.sendAll(by, sends)
	for to, ks := range bsends {
		if ts := to.s.track.Load(); ts != nil && ts.bcast {
			t.send(by, to.s, ts, ks, false)
		}
	}
}

// bcastTo is a BCAST connection and one of its prefixes: as Redis, a write sends one
// invalidation per prefix, of the keys under it.
type bcastTo struct {
	s      *Session
	prefix string
}

// sendAll sends the default-mode invalidations sends, written by by.
func (t *tracker) sendAll(by *Session, sends []sendTo) {
	for _, st := range sends {
		target := t.session(st.id)
		if target == nil {
			continue
		}
		ts := target.track.Load()
		if ts == nil || ts.bcast || (ts.noloop && target == by) {
			continue
		}
		t.send(by, target, ts, [][]byte{[]byte(st.key)}, false)
	}
}

// invalidateAll is a flush of workspace ws: every tracking connection of it gets a null
// invalidation, and the table forgets the workspace's keys.
func (t *tracker) invalidateAll(by *Session, ws string) {
	if t.clients.Load() == 0 {
		return
	}
	t.mu.Lock()
	for k := range t.keys {
		if w, _ := splitWsKey(k); w == ws {
			delete(t.keys, k)
		}
	}
	for k := range t.bexp {
		if w, _ := splitWsKey(k); w == ws {
			delete(t.bexp, k)
		}
	}
	t.mu.Unlock()
	t.sessMu.Lock()
	var targets []*Session
	for _, s := range t.sessions {
		if s.Workspace == ws && s.track.Load() != nil {
			targets = append(targets, s)
		}
	}
	t.sessMu.Unlock()
	for _, s := range targets {
		if ts := s.track.Load(); ts != nil {
			t.send(by, s, ts, nil, true)
		}
	}
}

// send writes one invalidation of keys (flush: of everything) for target, written by by:
// to target or its REDIRECT connection, as Redis's sendTrackingMessage.
func (t *tracker) send(by, target *Session, ts *trackState, keys [][]byte, flush bool) {
	dst := target
	if ts.redirect != 0 {
		dst = t.session(ts.redirect)
		if dst == nil {
			target.trackBroken.Store(true)
			if target.Proto() == 3 {
				b := appendPushHeader(nil, 3, 2)
				b = resp.AppendBulkString(b, "tracking-redir-broken")
				b = append(b, ':')
				b = strconv.AppendInt(b, ts.redirect, 10)
				deliverPush(by, target, append(b, '\r', '\n'))
			}
			return
		}
	}
	var b []byte
	switch {
	case dst.Proto() == 3:
		b = appendPushHeader(nil, 3, 2)
		b = resp.AppendBulkString(b, "invalidate")
	case ts.redirect != 0 && dst.subscribed():
		b = appendPushHeader(nil, 2, 3)
		b = resp.AppendBulkString(b, "message")
		b = resp.AppendBulkString(b, "__redis__:invalidate")
	default: // RESP2 without a subscribed redirect: Redis sends nothing either
		return
	}
	switch {
	case flush && target.Proto() == 3: // the tracking connection's null, as Redis writes it
		b = append(b, '_', '\r', '\n')
	case flush:
		b = append(b, '$', '-', '1', '\r', '\n')
	default:
		b = resp.AppendArray(b, len(keys))
		for _, k := range keys {
			b = resp.AppendBulk(b, k)
		}
	}
	deliverPush(by, dst, b)
}

// deliverPush gives b to dst: after the current reply when dst is the connection whose
// command caused it (by), else through its outbox.
func deliverPush(by, dst *Session, b []byte) {
	if dst == by {
		by.selfPush = append(by.selfPush, b...)
		return
	}
	dst.Push(b)
}

// expEntry is a key to invalidate once its expiry has passed: a remembered key (bcast
// false) or a written key under a BCAST prefix.
type expEntry struct {
	at    int64
	k     string
	bcast bool
}

type expHeap []expEntry

func (h expHeap) Len() int           { return len(h) }
func (h expHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expHeap) Push(x any)        { *h = append(*h, x.(expEntry)) }
func (h *expHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// scheduleLocked has the timer invalidate k once at (ms) has passed. Entries made stale by
// a later read or write stay in the heap and are skipped; past four times the table's
// bound (the live ones are at most twice it) it is rebuilt from the live ones.
func (t *tracker) scheduleLocked(k string, at int64, bcast bool) {
	if len(t.exp) >= 4*t.max+1024 {
		t.rebuildLocked()
	}
	heap.Push(&t.exp, expEntry{at: at, k: k, bcast: bcast})
	if t.timeAt == 0 || at < t.timeAt {
		t.armLocked(at)
	}
}

func (t *tracker) rebuildLocked() {
	h := expHeap{}
	for k, e := range t.keys {
		if e.expireAt > 0 {
			h = append(h, expEntry{at: e.expireAt, k: k})
		}
	}
	for k, at := range t.bexp {
		h = append(h, expEntry{at: at, k: k, bcast: true})
	}
	heap.Init(&h)
	t.exp = h
}

// armLocked sets the timer to fire just after at.
func (t *tracker) armLocked(at int64) {
	d := time.Duration(at-t.nowMs()+1) * time.Millisecond
	if t.timer == nil {
		t.timer = time.AfterFunc(max(d, 0), t.expire)
	} else {
		t.timer.Reset(max(d, 0))
	}
	t.timeAt = at
}

// expire invalidates the keys whose expiry has passed, as Redis invalidates a key it
// deletes for its TTL.
func (t *tracker) expire() {
	now := t.nowMs()
	var sends []sendTo
	bcastKeys := map[string][][]byte{} // by workspace
	t.mu.Lock()
	t.timeAt = 0
	for len(t.exp) > 0 && t.exp[0].at < now {
		e := heap.Pop(&t.exp).(expEntry)
		ws, key := splitWsKey(e.k)
		if e.bcast {
			if t.bexp[e.k] == e.at {
				delete(t.bexp, e.k)
				bcastKeys[ws] = append(bcastKeys[ws], []byte(key))
			}
			continue
		}
		if te := t.keys[e.k]; te != nil && te.expireAt == e.at {
			delete(t.keys, e.k)
			for id := range te.ids {
				sends = append(sends, sendTo{id, key})
			}
		}
	}
	if len(t.exp) > 0 {
		t.armLocked(t.exp[0].at)
	}
	t.mu.Unlock()
	t.sendAll(nil, sends)
	for ws, keys := range bcastKeys {
		t.invalidate(nil, ws, keys, nil)
	}
}

// clientTracking serves CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST]
// [OPTIN] [OPTOUT] [NOLOOP], checked in Redis's order with Redis's replies.
func (d *Dispatcher) clientTracking(s *Session, w *resp.Writer, args [][]byte) {
	ts := &trackState{}
	for i := 1; i < len(args); i++ {
		more := i+1 < len(args)
		switch strings.ToUpper(string(args[i])) {
		case "REDIRECT":
			if !more {
				w.Error(errSyntaxMsg)
				return
			}
			i++
			if ts.redirect != 0 {
				w.Error(errTrackRedirTwice)
				return
			}
			id, err := strconv.ParseInt(string(args[i]), 10, 64)
			if err != nil {
				w.Error(errNotInteger)
				return
			}
			if d.track.session(id) == nil {
				w.Error(errTrackNoRedir)
				return
			}
			ts.redirect = id
		case "BCAST":
			ts.bcast = true
		case "OPTIN":
			ts.optin = true
		case "OPTOUT":
			ts.optout = true
		case "NOLOOP":
			ts.noloop = true
		case "PREFIX":
			if !more {
				w.Error(errSyntaxMsg)
				return
			}
			i++
			ts.prefixes = append(ts.prefixes, string(args[i]))
		default:
			w.Error(errSyntaxMsg)
			return
		}
	}
	switch strings.ToUpper(string(args[0])) {
	case "ON":
		if msg := d.checkTracking(s, ts); msg != "" {
			w.Error(msg)
			return
		}
		d.track.on(s, ts)
	case "OFF":
		d.track.off(s)
	default:
		w.Error(errSyntaxMsg)
		return
	}
	w.OK()
}

// checkTracking returns Redis's error for turning tracking on with ts, "" when it may.
func (d *Dispatcher) checkTracking(s *Session, ts *trackState) string {
	old := s.track.Load()
	switch {
	case d.kv() == nil:
		return errTrackingOnEdge
	case !ts.bcast && len(ts.prefixes) > 0:
		return errTrackPrefixBcast
	case old != nil && old.bcast != ts.bcast:
		return errTrackSwitchBcast
	case ts.bcast && (ts.optin || ts.optout):
		return errTrackBcastOpt
	case ts.optin && ts.optout:
		return errTrackBothOpt
	case old != nil && (ts.optin && old.optout || ts.optout && old.optin):
		return errTrackSwitchOpt
	}
	var have []string
	if old != nil {
		have = old.prefixes
	}
	for i, p := range ts.prefixes {
		for _, h := range have {
			if strings.HasPrefix(h, p) || strings.HasPrefix(p, h) {
				return "ERR Prefix '" + p + "' overlaps with an existing prefix '" + h + "'. Prefixes for a single client must not overlap."
			}
		}
		for _, q := range ts.prefixes[i+1:] {
			if strings.HasPrefix(q, p) || strings.HasPrefix(p, q) {
				return "ERR Prefix '" + p + "' overlaps with another provided prefix '" + q + "'. Prefixes for a single client must not overlap."
			}
		}
	}
	return ""
}

// clientCaching serves CLIENT CACHING YES|NO: the next command (a whole transaction) is
// remembered (OPTIN) or not (OPTOUT).
func clientCaching(s *Session, w *resp.Writer, arg []byte) {
	ts := s.track.Load()
	switch {
	case ts == nil:
		w.Error(errCachingNoTrack)
	case strings.EqualFold(string(arg), "yes") && !ts.optin:
		w.Error(errCachingYes)
	case strings.EqualFold(string(arg), "no") && !ts.optout:
		w.Error(errCachingNo)
	case strings.EqualFold(string(arg), "yes"), strings.EqualFold(string(arg), "no"):
		s.caching = true
		w.OK()
	default:
		w.Error(errSyntaxMsg)
	}
}

// clientTrackingInfo serves CLIENT TRACKINGINFO.
func clientTrackingInfo(s *Session, w *resp.Writer) {
	flags, redirect, prefixes := []string{"off"}, int64(-1), []string(nil)
	if ts := s.track.Load(); ts != nil {
		flags, redirect = ts.flagNames(s), ts.redirect
		if ts.bcast {
			prefixes = ts.prefixes
		}
	}
	w.Map(3)
	w.BulkString("flags")
	w.Raw(appendAggregate(nil, w.Proto(), '~', len(flags))) // a set
	for _, f := range flags {
		w.BulkString(f)
	}
	w.BulkString("redirect")
	w.Int(redirect)
	w.BulkString("prefixes")
	w.Array(len(prefixes))
	for _, p := range prefixes {
		w.BulkString(p)
	}
}

// flagNames are TRACKINGINFO's flags of s tracking with ts, in Redis's order.
func (ts *trackState) flagNames(s *Session) []string {
	flags := []string{"on"}
	for _, f := range []struct {
		on   bool
		name string
	}{{ts.bcast, "bcast"}, {ts.optin, "optin"}, {ts.optin && s.caching, "caching-yes"}, {ts.optout, "optout"},
		{ts.optout && s.caching, "caching-no"}, {ts.noloop, "noloop"}, {s.trackBroken.Load(), "broken_redirect"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	return flags
}

// clientGetRedir serves CLIENT GETREDIR: the redirect (0: none), -1 with tracking off.
func clientGetRedir(s *Session, w *resp.Writer) {
	if ts := s.track.Load(); ts != nil {
		w.Int(ts.redirect)
		return
	}
	w.Int(-1)
}

// endCommand ends what lasts one command (args), served or refused: CLIENT CACHING's
// choice, kept through CLIENT commands and a transaction (until its EXEC), as Redis's
// resetClient keeps it. The invalidations of the command's own writes follow its reply.
func (s *Session) endCommand(w *resp.Writer, args [][]byte) {
	if s.caching && s.tx == nil && (len(args) == 0 || !strings.EqualFold(string(args[0]), "client")) {
		s.caching = false
	}
	if len(s.selfPush) > 0 {
		w.Raw(s.selfPush)
		s.selfPush = s.selfPush[:0]
	}
}

// counts returns INFO's tracking figures: keys in the table, BCAST prefixes in use.
func (t *tracker) counts() (keys, prefixes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, byPrefix := range t.bcast {
		prefixes += len(byPrefix)
	}
	return len(t.keys), prefixes
}
