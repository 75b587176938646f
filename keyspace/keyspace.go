// Package keyspace holds the Redis-compatible keys of an origin: the state of the drop-in
// commands (GET, SET, INCRBY, EXPIRE, ..., the data types scripts use) and CL.THROTTLE's
// theoretical arrival times, with millisecond TTLs, bounded by --max-memory beside the
// rate limiter's cells and saved in snapshots. It knows no sockets and no replies: package
// commands parses requests and writes Redis's replies; package engine, which keeps the
// rate limiter, makes one KV sharing its memory gauge.
package keyspace

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ratchet/ratchet/internal/shardlock"
)

// The counter keyspace: small string values with millisecond TTLs, the state of the
// drop-in commands (GET, SET, INCRBY, EXPIRE, ... and CL.THROTTLE's theoretical arrival
// times). It is regional: an origin holds it, nothing of it is replicated to peers.
//
// Concurrency: keys are split into kvShardCount shards by a hash of the workspace-encoded
// key. Each shard's mutex guards its index and entries. KV.Do locks the shards of every
// key it is given, in shard order, reads the clock once and runs its callback: the
// callback's operations on those keys are one step, which no other request interleaves.
// Every other holder of a shard lock (Sweep, Records, Scan) holds one at a time, and no
// holder of a KV lock waits for another KV lock out of order, so nothing deadlocks. A
// caller that also takes cell-store shard locks (a transaction mixing RL.LIMIT and counter
// commands) takes the KV locks first.
//
// Memory: the estimated bytes of every entry are added to the cell store's gauge and
// bounded by the same --max-memory: a new key when the budget is spent gets ErrFull;
// existing keys keep working (a value that grows is charged without refusal, except a SET
// of a longer value, which is refused like a new key). Expired keys are dropped when a
// request touches them and by Sweep (every second on an origin), which walks the shards.
//
// Layout: a shard keeps its entries in a dense slice (no holes: a delete moves the last
// entry into the hole) indexed by a map from key to position. Entries only ever move to a
// lower position, which is what lets Scan walk a shard from the top with a cursor that
// survives concurrent deletes (see Scan).

// kvShardCount is the number of shards of the keyspace. A power of two.
const kvShardCount = 64

// kvEntryOverhead estimates the bytes of one key beyond its key and value bytes: the
// entry in the dense slice (56 with growth slack: the obj pointer of the data types made
// it 8 bytes longer), the map's bucket share (key header, position, hash bits) and the
// allocations' headers. It feeds --max-memory only; BenchmarkKVMemory measures the real
// figure (1M counters with 13-byte keys: 156.5 heap bytes and 161 resident bytes per key,
// against 160 estimated; 147 heap bytes before the pointer, when 120 gave 152).
const kvEntryOverhead = 128

// MaxValue is the longest value the keyspace holds, in bytes.
const MaxValue = 64 << 10

// MaxKey is the longest key the keyspace holds, in bytes.
const MaxKey = 1024

// Errors of keyspace operations, tested with errors.Is; commands/errors.go writes their
// replies (Redis's texts).
var (
	// ErrNotInteger: INCRBY on a value that is not a decimal 64-bit integer.
	ErrNotInteger = errors.New("value is not an integer or out of range")
	// ErrOverflow: INCRBY whose result does not fit 64 bits.
	ErrOverflow = errors.New("increment or decrement would overflow")
	// ErrValueTooLarge: a value longer than MaxValue.
	ErrValueTooLarge = errors.New("value exceeds MaxValue")
	// ErrKeyTooLarge: a key longer than MaxKey.
	ErrKeyTooLarge = errors.New("key exceeds MaxKey")
	// ErrFull: a write that needs memory beyond the bound (Config.MaxBytes).
	ErrFull = errors.New("keyspace is full")
)

// KV is the keyspace. Its zero value is not usable: New makes one. It is safe for
// concurrent use.
type KV struct {
	shards   [kvShardCount]kvShard
	seed     maphash.Seed
	clock    Clock
	bytes    *atomic.Int64 // shared with the cell store: the --max-memory gauge
	maxBytes int64
	keys     atomic.Int64  // keys held, expired ones not yet dropped included
	expired  atomic.Uint64 // keys dropped because their TTL passed
	onFull   func()        // told of each refusal (after the locks are released)
	onWrite  func()        // told that the keyspace changed (snapshots)
}

type kvShard struct {
	mu       sync.Mutex
	index    map[string]int32 // key -> position in entries
	entries  []kvEntry
	watchers map[string][]*Watch // key -> the connections watching it (watch.go); nil until one does
	objs     int                 // entries holding a collection (types.go), not a string
}

// kvEntry is one key. key is the workspace-encoded key (see kvKey). A string's value is
// val; another type's is obj (types.go), val then being empty.
type kvEntry struct {
	key      string
	val      []byte
	expireAt int64   // ms since the epoch; 0: no expiry
	obj      *object // nil: a string
}

// alive reports whether the entry has not expired at nowMs. As in Redis, a key expires
// once the clock passes its expiry: at the expiry millisecond itself it is still there.
func (en *kvEntry) alive(nowMs int64) bool { return en.expireAt == 0 || nowMs <= en.expireAt }

// kvEntryBytes estimates the bytes a key of n bytes with a value of capacity c costs.
func kvEntryBytes(n, c int) int64 {
	return kvEntryOverhead + int64(n+15)&^15 + int64(c+15)&^15
}

// Clock is the keyspace's source of time, in milliseconds since the Unix epoch (engine's
// clocks satisfy it).
type Clock interface {
	NowMs() int64
}

// MicroClock is a Clock that also reads microseconds: the time scripts read with TIME.
// A Clock without it gives scripts its milliseconds, times 1000.
type MicroClock interface {
	Clock
	// NowUs returns the time in microseconds since the Unix epoch.
	NowUs() int64
}

// Config says how New makes a KV.
type Config struct {
	// Clock is the only source of time (required).
	Clock Clock
	// Bytes is the memory gauge the keyspace adds its estimate to, shared with whoever else
	// counts within the same bound (the engine's cell store); nil: the keyspace's own.
	Bytes *atomic.Int64
	// MaxBytes bounds the gauge: a write that needs more memory gets ErrFull.
	MaxBytes int64
	// OnFull, when set, is told of each ErrFull refusal (after the locks are released).
	OnFull func()
	// OnWrite, when set, is told that the keyspace changed (snapshots).
	OnWrite func()
}

// New returns an empty keyspace.
func New(cfg Config) *KV {
	if cfg.Bytes == nil {
		cfg.Bytes = new(atomic.Int64)
	}
	kv := &KV{seed: maphash.MakeSeed(), clock: cfg.Clock, bytes: cfg.Bytes, maxBytes: cfg.MaxBytes, onFull: cfg.OnFull, onWrite: cfg.OnWrite}
	for i := range kv.shards {
		kv.shards[i].index = make(map[string]int32)
	}
	return kv
}

// defaultName is the workspace that AppendName encodes as one zero byte.
const defaultName = "default"

// AppendName appends a workspace's name as keys of the keyspace (and the engine's tuple
// keys) encode it: one zero byte for "default", else uvarint(len+1) and the name.
func AppendName(dst []byte, s string) []byte {
	if s == defaultName {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	return append(dst, s...)
}

// uvarint decodes a minimal uvarint from b: n, and the bytes it used (0 when malformed,
// truncated or not minimal).
func uvarint(b []byte) (uint64, int) {
	n, used := binary.Uvarint(b)
	if used <= 0 || (used > 1 && b[used-1] == 0) {
		return 0, 0
	}
	return n, used
}

// kvKey appends the keyspace's key of key in workspace ws to dst: the workspace's name as
// AppendName encodes it, then the key. Workspaces never see each other's keys.
func kvKey(dst []byte, ws string, key []byte) []byte {
	return append(AppendName(dst, ws), key...)
}

// AppendKVKey appends the counter keyspace's key of key in workspace ws to dst. An edge
// places a forwarded command's key on an origin by it, as it places tuples by AppendKey.
func AppendKVKey(dst []byte, ws string, key []byte) []byte { return kvKey(dst, ws, key) }

// splitKVKey splits a keyspace key into its workspace and key (aliasing k).
func splitKVKey(k string) (ws, key string, ok bool) {
	n, used := uvarint([]byte(k[:min(len(k), 10)]))
	switch {
	case used == 0:
		return "", "", false
	case n == 0:
		return defaultName, k[used:], true
	case n-1 > uint64(len(k)-used):
		return "", "", false
	default:
		end := used + int(n-1)
		return k[used:end], k[end:], true
	}
}

// Keys returns the number of keys held (keys expired but not yet dropped included).
func (kv *KV) Keys() int64 { return kv.keys.Load() }

// Expired returns the number of keys dropped because their TTL passed.
func (kv *KV) Expired() uint64 { return kv.expired.Load() }

// shardIndex returns the shard of a keyspace key.
func (kv *KV) shardIndex(k []byte) int {
	return int(maphash.Bytes(kv.seed, k) % kvShardCount)
}

// Tx is the view of one KV.Do callback on its keys, all locked, at one instant. Keys are
// named by their index in the slice given to Do. A Tx, and every value it returns, is
// valid only during the callback.
type Tx struct {
	kv     *KV
	now    int64
	ws     string
	keys   []kvRef
	held   [kvShardCount / 64]uint64 // bit i: shard i is locked
	buf    []byte                    // the keyspace keys of keys, back to back
	wrote  bool
	full   int   // refusals to report after unlocking
	lastUs int64 // the last NowUs of the step
}

type kvRef struct {
	sh  *kvShard
	key []byte // the keyspace key; aliases Tx.buf
	end int    // while Do builds buf: the key's length
}

var txPool = sync.Pool{New: func() any { return new(Tx) }}

// Do locks the shards of keys (of workspace ws) in shard order, reads the clock once, runs
// fn and unlocks: fn's operations on these keys are one atomic step at one instant
// (tx.Now()). fn must not call Do itself, nor keep tx or a value it returned. Do returns
// fn's error, or ErrKeyTooLarge without calling fn.
func (kv *KV) Do(ws string, keys [][]byte, fn func(tx *Tx) error) error {
	return kv.do(ws, keys, false, fn)
}

// do is Do, holding every shard with all (DoAll).
func (kv *KV) do(ws string, keys [][]byte, all bool, fn func(tx *Tx) error) error {
	tx := txPool.Get().(*Tx)
	defer kv.release(tx)
	tx.kv, tx.ws = kv, ws
	for _, k := range keys {
		if len(k) > MaxKey {
			return ErrKeyTooLarge
		}
	}
	for _, k := range keys {
		start := len(tx.buf)
		tx.buf = kvKey(tx.buf, ws, k)
		tx.keys = append(tx.keys, kvRef{end: len(tx.buf) - start})
	}
	off := 0
	for j := range tx.keys {
		r := &tx.keys[j]
		r.key = tx.buf[off : off+r.end : off+r.end]
		off += r.end
		i := kv.shardIndex(r.key)
		r.sh = &kv.shards[i]
		tx.held[i/64] |= 1 << (i % 64)
	}
	if all {
		for w := range tx.held {
			tx.held[w] = ^uint64(0)
		}
	}
	tx.lock()
	tx.now = kv.clock.NowMs()
	err := fn(tx)
	tx.unlock()
	if tx.wrote && kv.onWrite != nil {
		kv.onWrite()
	}
	for ; tx.full > 0; tx.full-- {
		if kv.onFull != nil {
			kv.onFull()
		}
	}
	return err
}

func (kv *KV) release(tx *Tx) {
	if cap(tx.buf) > 64<<10 || cap(tx.keys) > 1024 {
		return // a very large request's buffers are not kept
	}
	tx.kv, tx.ws, tx.keys, tx.buf, tx.held, tx.wrote, tx.full = nil, "", tx.keys[:0], tx.buf[:0], [kvShardCount / 64]uint64{}, false, 0
	tx.lastUs = 0
	txPool.Put(tx)
}

func (tx *Tx) holds(i int) bool { return tx.held[i/64]&(1<<(i%64)) != 0 }

// lock locks the held shards in ascending order; unlock unlocks them.
func (tx *Tx) lock() {
	for w, word := range tx.held {
		for ; word != 0; word &= word - 1 {
			tx.kv.shards[w*64+bits.TrailingZeros64(word)].mu.Lock()
		}
	}
}

func (tx *Tx) unlock() {
	for w, word := range tx.held {
		for ; word != 0; word &= word - 1 {
			tx.kv.shards[w*64+bits.TrailingZeros64(word)].mu.Unlock()
		}
	}
}

// Now returns the instant of the step, in ms since the epoch (the engine's clock).
func (tx *Tx) Now() int64 { return tx.now }

// NowUs returns the time a script reads with TIME, in microseconds since the epoch. As
// Redis's TIME, it is read when called (it moves during a step: the scripts of one
// MULTI do not share it), from the clock's microseconds (MicroClock; else its ms times
// 1000). It is never before the step's instant (Now), and each call of a step is later
// than the one before: Redis spends microseconds on each script, while a native one may
// take less than one, and a burst at one reading would accumulate the scripts' rounding
// (go-redis/redis_rate then refused the last call of a full burst).
func (tx *Tx) NowUs() int64 {
	us := tx.now * 1000
	if mc, ok := tx.kv.clock.(MicroClock); ok {
		us = max(us, mc.NowUs())
	}
	if tx.lastUs != 0 && us <= tx.lastUs {
		us = tx.lastUs + 1
	}
	tx.lastUs = us
	return us
}

// Len returns the number of keys given to Do.
func (tx *Tx) Len() int { return len(tx.keys) }

// entry returns key i's live entry, or nil; an expired entry is dropped on the way.
func (tx *Tx) entry(i int) *kvEntry {
	r := tx.keys[i]
	p, ok := r.sh.index[string(r.key)]
	if !ok {
		return nil
	}
	en := &r.sh.entries[p]
	if !en.alive(tx.now) {
		tx.kv.remove(r.sh, p)
		tx.kv.expired.Add(1)
		tx.wrote = true
		return nil
	}
	return en
}

// Get returns key i's string value and true, or nil and false when the key does not exist
// or holds another type (Kind tells them apart). The value is valid only during the
// callback.
func (tx *Tx) Get(i int) ([]byte, bool) {
	if en := tx.entry(i); en != nil && en.obj == nil {
		return en.val, true
	}
	return nil, false
}

// Kind returns the type of key i's value: KindNone when the key does not exist.
func (tx *Tx) Kind(i int) Kind {
	switch en := tx.entry(i); {
	case en == nil:
		return KindNone
	case en.obj == nil:
		return KindString
	default:
		return en.obj.kind
	}
}

// Exists reports whether key i exists.
func (tx *Tx) Exists(i int) bool { return tx.entry(i) != nil }

// ExpireAt returns key i's expiry in ms since the epoch (0: none) and whether the key
// exists.
func (tx *Tx) ExpireAt(i int) (int64, bool) {
	if en := tx.entry(i); en != nil {
		return en.expireAt, true
	}
	return 0, false
}

// PTTL returns key i's time to live in ms as Redis's PTTL does: -2 when the key does not
// exist, -1 when it has no expiry.
func (tx *Tx) PTTL(i int) int64 {
	en := tx.entry(i)
	switch {
	case en == nil:
		return -2
	case en.expireAt == 0:
		return -1
	default:
		return max(0, en.expireAt-tx.now)
	}
}

// Set stores val (copied) as key i's value with expiry expireAt (ms since the epoch; 0:
// none). As with Redis's SET ... PXAT, an expiry before Now leaves no key, and one at Now
// a key that lives until the clock moves on. A new key, or a longer value, that does not
// fit --max-memory gets ErrFull and changes nothing.
func (tx *Tx) Set(i int, val []byte, expireAt int64) error {
	return tx.set(i, val, expireAt, false)
}

// SetKeepTTL stores val (copied) as key i's value, keeping its expiry (none for a new key).
func (tx *Tx) SetKeepTTL(i int, val []byte) error { return tx.set(i, val, 0, true) }

func (tx *Tx) set(i int, val []byte, expireAt int64, keepTTL bool) error {
	if len(val) > MaxValue {
		return ErrValueTooLarge
	}
	en := tx.entry(i)
	if !keepTTL && expireAt != 0 && expireAt < tx.now {
		if en != nil {
			tx.Del(i)
		}
		return nil
	}
	if en == nil {
		var err error
		if en, err = tx.insert(i, len(val), true); err != nil {
			return err
		}
		en.val = append(en.val[:0], val...)
		en.expireAt = expireAt
		return nil
	}
	if err := tx.grow(en, len(val), true); err != nil {
		return err
	}
	tx.kv.dropObject(tx.keys[i].sh, en) // SET replaces a value of any type
	en.val = append(en.val[:0], val...)
	if !keepTTL {
		en.expireAt = expireAt
	}
	tx.changed(i)
	return nil
}

// changed records that key i was written: snapshots and watchers are told.
func (tx *Tx) changed(i int) {
	tx.wrote = true
	if r := &tx.keys[i]; len(r.sh.watchers) > 0 {
		r.sh.touch(string(r.key))
	}
}

// grow makes en's value capacity at least n, charging the difference to the budget.
// With check, growth beyond the budget is refused with ErrFull.
func (tx *Tx) grow(en *kvEntry, n int, check bool) error {
	if n <= cap(en.val) {
		return nil
	}
	c := max(n, 8)
	delta := kvEntryBytes(0, c) - kvEntryBytes(0, cap(en.val))
	if !tx.kv.charge(delta, check) {
		tx.full++
		return ErrFull
	}
	nv := make([]byte, len(en.val), c)
	copy(nv, en.val)
	en.val = nv
	return nil
}

// charge adds n bytes to the budget; with check it refuses (and adds nothing) when the
// budget would be passed.
func (kv *KV) charge(n int64, check bool) bool {
	if v := kv.bytes.Add(n); check && n > 0 && v > kv.maxBytes {
		kv.bytes.Add(-n)
		return false
	}
	return true
}

// insert adds key i with an empty value of capacity at least n, or returns ErrFull when
// check is set and the budget is spent.
func (tx *Tx) insert(i int, n int, check bool) (*kvEntry, error) {
	r := tx.keys[i]
	c := max(n, 8)
	if !tx.kv.charge(kvEntryBytes(len(r.key), c), check) {
		tx.full++
		return nil, ErrFull
	}
	key := string(r.key)
	r.sh.touch(key)
	r.sh.index[key] = int32(len(r.sh.entries))
	r.sh.entries = append(r.sh.entries, kvEntry{key: key, val: make([]byte, 0, c)})
	tx.kv.keys.Add(1)
	tx.wrote = true
	return &r.sh.entries[len(r.sh.entries)-1], nil
}

// SetExpireAt sets key i's expiry (ms since the epoch; 0 removes it). An expiry at or
// before Now deletes the key, as Redis does. It reports false when the key does not exist.
func (tx *Tx) SetExpireAt(i int, at int64) bool {
	en := tx.entry(i)
	if en == nil {
		return false
	}
	if at != 0 && at <= tx.now {
		tx.Del(i)
		return true
	}
	en.expireAt = at
	tx.changed(i)
	return true
}

// Del deletes key i and reports whether it existed.
func (tx *Tx) Del(i int) bool {
	r := tx.keys[i]
	if tx.entry(i) == nil {
		return false
	}
	tx.kv.remove(r.sh, r.sh.index[string(r.key)])
	tx.wrote = true
	return true
}

// IncrBy adds delta to key i's integer value (a new key counts from 0, with no expiry; an
// existing key keeps its expiry) and returns the result, as Redis's INCRBY: ErrNotInteger
// when the value is not a decimal 64-bit integer, ErrOverflow when the sum does not fit.
// A new key that does not fit --max-memory gets ErrFull.
func (tx *Tx) IncrBy(i int, delta int64) (int64, error) {
	en := tx.entry(i)
	var cur int64
	if en != nil && en.obj != nil {
		return 0, ErrWrongType
	}
	if en != nil {
		v, ok := ParseInt(en.val)
		if !ok {
			return 0, ErrNotInteger
		}
		cur = v
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, ErrOverflow
	}
	cur += delta
	var digits [20]byte
	s := strconv.AppendInt(digits[:0], cur, 10)
	if en == nil {
		var err error
		if en, err = tx.insert(i, len(s), true); err != nil {
			return 0, err
		}
	} else {
		_ = tx.grow(en, len(s), false) // a counter's few more digits are never refused
		tx.changed(i)
	}
	en.val = append(en.val[:0], s...)
	return cur, nil
}

// ParseInt reads b as Redis reads an integer (string2ll): an optional '-', then
// digits without leading zeros ("0" itself, not "-0"), no '+', no spaces, within 64 bits.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true // -(1<<63) wraps to itself: MinInt64
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// remove deletes the entry at position p of sh (locked): the last entry moves into the
// hole, so entries only move down.
func (kv *KV) remove(sh *kvShard, p int32) {
	en := &sh.entries[p]
	sh.touch(en.key)
	kv.bytes.Add(-kvEntryBytes(len(en.key), cap(en.val)))
	kv.dropObject(sh, en)
	kv.keys.Add(-1)
	delete(sh.index, en.key)
	last := int32(len(sh.entries) - 1)
	if p != last {
		sh.entries[p] = sh.entries[last]
		sh.index[sh.entries[p].key] = p
	}
	sh.entries[last] = kvEntry{}
	sh.entries = sh.entries[:last]
	if cap(sh.entries) > 64 && len(sh.entries) < cap(sh.entries)/4 {
		sh.entries = append([]kvEntry(nil), sh.entries...) // give back what a burst of keys took
	}
}

// Sweep drops the keys whose TTL passed at the clock's reading and returns how many. It
// visits the shards in turn, giving way between them.
func (kv *KV) Sweep() int64 {
	now := kv.clock.NowMs()
	var n int64
	for i := range kv.shards {
		sh := &kv.shards[i]
		shardlock.LockYielding(&sh.mu)
		for p := len(sh.entries) - 1; p >= 0; p-- { // backwards: a delete moves a visited entry
			if !sh.entries[p].alive(now) {
				kv.remove(sh, int32(p))
				n++
			}
		}
		sh.mu.Unlock()
		runtime.Gosched()
	}
	if n > 0 {
		kv.expired.Add(uint64(n))
		if kv.onWrite != nil {
			kv.onWrite()
		}
	}
	return n
}

// Scan cursors: a cursor names a shard and how far down its dense entries the walk got:
// shard<<32 | (scanTop - pos), where pos is the exclusive upper bound of the positions left
// to visit (scanTop: all of them). Cursor 0 starts at shard 0 from the top; Scan returns 0
// when it has visited every shard. A walk goes down, and entries only move down (to fill a
// hole): an entry present for the whole walk is met at least once; one may be met twice.
const scanTop = 1<<32 - 1

// Scan returns keys of workspace ws, starting at cursor, after examining about count
// entries (of every workspace, expired ones included), and the cursor to continue from (0
// when the walk is over). Only keys for which match returns true (nil: all) are returned;
// match sees the key without its workspace, and its type, and must not keep the key. The
// keys returned are copies.
func (kv *KV) Scan(ws string, cursor uint64, count int, match func(key []byte, k Kind) bool) (uint64, [][]byte) {
	return kv.scan(nil, ws, cursor, count, match)
}

// Scan is KV.Scan from inside Do: the shards tx holds are read without locking them again.
// Others are locked one at a time; when tx holds shards, one that stays busy ends the call
// early with a cursor that resumes at it (waiting could deadlock).
func (tx *Tx) Scan(cursor uint64, count int, match func(key []byte, k Kind) bool) (uint64, [][]byte) {
	return tx.kv.scan(tx, tx.ws, cursor, count, match)
}

func (kv *KV) scan(tx *Tx, ws string, cursor uint64, count int, match func(key []byte, k Kind) bool) (uint64, [][]byte) {
	count = max(count, 1)
	prefix := string(AppendName(nil, ws))
	shard := cursor >> 32
	pos := scanTop - int64(cursor&scanTop)
	var out [][]byte
	examined, shardsSeen := 0, 0
	now := kv.clock.NowMs()
	if tx != nil {
		now = tx.now
	}
	for shard < kvShardCount {
		sh := &kv.shards[shard]
		locked := tx != nil && tx.holds(int(shard))
		switch {
		case locked:
		case tx != nil && tx.held != [kvShardCount / 64]uint64{}:
			// Holding other shards, waiting for this one could deadlock with a step that
			// holds it and waits for one of ours: try for a while, else stop here (a
			// nonzero cursor that resumes at this shard).
			if !shardlock.TryLockFor(&sh.mu, shardlock.YieldingFor) {
				return shard<<32 | uint64(scanTop-min(pos, scanTop-1)), out
			}
		default:
			sh.mu.Lock()
		}
		p := min(pos, int64(len(sh.entries)))
		for p > 0 && examined < count {
			p--
			examined++
			en := &sh.entries[p]
			if !en.alive(now) || len(en.key) < len(prefix) || en.key[:len(prefix)] != prefix {
				continue
			}
			k := []byte(en.key[len(prefix):])
			if match == nil || match(k, en.kind()) {
				out = append(out, k)
			}
		}
		if !locked {
			sh.mu.Unlock()
		}
		shardsSeen++
		if p > 0 {
			return shard<<32 | uint64(scanTop-p), out
		}
		shard, pos = shard+1, scanTop
		if examined >= count || shardsSeen >= 10*count {
			break
		}
	}
	if shard >= kvShardCount {
		return 0, out
	}
	return shard << 32, out
}

// Record is one key as it is saved and loaded.
type Record struct {
	Workspace string
	Key       string
	// Kind is the value's type: KindString, or a collection whose elements Value encodes
	// (encode.go). KindNone reads as KindString (records saved before types existed).
	Kind       Kind
	Value      []byte
	ExpireAtMs int64 // ms since the epoch; 0: no expiry
}

// Records yields every live key. Each shard is copied under its lock and yielded after it
// is released; a record's strings and Value are its own. Shards are visited in turn.
func (kv *KV) Records(yield func(Record) bool) {
	var recs []Record
	for i := range kv.shards {
		sh := &kv.shards[i]
		recs = recs[:0]
		shardlock.LockYielding(&sh.mu)
		now := kv.clock.NowMs()
		for p := range sh.entries {
			en := &sh.entries[p]
			if !en.alive(now) {
				continue
			}
			ws, key, ok := splitKVKey(en.key)
			if !ok {
				continue
			}
			r := Record{Workspace: ws, Key: key, Kind: KindString, ExpireAtMs: en.expireAt}
			if en.obj != nil {
				r.Kind, r.Value = en.obj.kind, en.obj.encode(nil)
			} else {
				r.Value = append([]byte(nil), en.val...)
			}
			recs = append(recs, r)
		}
		sh.mu.Unlock()
		for _, r := range recs {
			if !yield(r) {
				return
			}
		}
		runtime.Gosched()
	}
}

// Restore loads records: expired ones are dropped, and so are those the keyspace cannot
// hold (too long, a collection that does not decode or passes the bounds); the others are
// set (replacing a key already held), even beyond --max-memory (new keys are then refused
// until room is made). It returns the number loaded and dropped.
func (kv *KV) Restore(recs []Record) (loaded, dropped int) {
	for _, r := range recs {
		var obj *object
		if r.Kind > KindString {
			var err error
			if obj, err = decodeObject(r.Kind, r.Value); err != nil {
				dropped++
				continue
			}
			r.Value = nil
		}
		if len(r.Key) > MaxKey || len(r.Value) > MaxValue {
			dropped++
			continue
		}
		now := kv.clock.NowMs()
		if r.ExpireAtMs != 0 && r.ExpireAtMs < now {
			dropped++
			continue
		}
		_ = kv.Do(r.Workspace, [][]byte{[]byte(r.Key)}, func(tx *Tx) error {
			en := tx.entry(0)
			if en == nil {
				en, _ = tx.insert(0, len(r.Value), false)
			} else {
				_ = tx.grow(en, len(r.Value), false)
			}
			sh := tx.keys[0].sh
			tx.kv.dropObject(sh, en)
			en.val = append(en.val[:0], r.Value...)
			en.expireAt = r.ExpireAtMs
			if obj != nil {
				en.obj = obj
				sh.objs++
				tx.kv.charge(obj.size(), false)
				obj.charged = obj.size()
			}
			return nil
		})
		loaded++
	}
	return loaded, dropped
}
