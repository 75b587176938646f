package keyspace

import "sync/atomic"

// WATCH over the counter keyspace, as Redis does it: a registry of watchers per key, and a
// flag that any change to a watched key sets.
//
// Each shard maps a watched keyspace key to the Watches that watch it (kvShard.watchers,
// guarded by the shard's mutex). Every change to a key, made under that mutex, sets the
// dirty flag of its watchers: a write (SET, INCRBY, EXPIRE, ... and the writes of scripts
// and CL.THROTTLE, which all go through Tx), a DEL, and the removal of an expired key
// (by a request or by Sweep). A key that is alive when watched and whose TTL passes
// before EXEC counts as changed even if nothing removed it yet: Watch keeps the expiry it
// saw, which only a change (that sets the flag) can alter. A key already expired when
// watched is dropped first, so its removal is no change, as in Redis.
//
// A Watch belongs to one connection, whose goroutine alone calls KV.Watch, Clear and the
// checks; writers of other connections only set its flag.

// Watch is one connection's watched keys. Its zero value watches nothing.
type Watch struct {
	dirty atomic.Bool
	keys  []watchedKey
}

// watchedKey is one key a Watch is registered for.
type watchedKey struct {
	sh       *kvShard
	key      string // the keyspace key (workspace and key)
	expireAt int64  // the key's expiry when watched (ms since the epoch); 0: none, or no key
}

// Len returns the number of keys watched.
func (w *Watch) Len() int { return len(w.keys) }

// touch marks the watchers of key (a keyspace key of sh, whose mutex is held) as changed.
func (sh *kvShard) touch(key string) {
	if len(sh.watchers) == 0 {
		return
	}
	for _, w := range sh.watchers[key] {
		w.dirty.Store(true)
	}
}

// Watch adds keys of workspace ws to w: a change to any of them from now on makes
// w's checks report a change. Keys longer than MaxKey are skipped: the keyspace can
// never hold them, so they never change.
func (kv *KV) Watch(w *Watch, ws string, keys [][]byte) error {
	fit := keys[:0:0]
	for _, k := range keys {
		if len(k) <= MaxKey {
			fit = append(fit, k)
		}
	}
	return kv.Do(ws, fit, func(tx *Tx) error {
		for i := range tx.keys {
			r := &tx.keys[i]
			var exp int64
			if en := tx.entry(i); en != nil { // an expired key is dropped now: no change later
				exp = en.expireAt
			}
			key := string(r.key)
			if watching(r.sh.watchers[key], w) {
				continue
			}
			if r.sh.watchers == nil {
				r.sh.watchers = make(map[string][]*Watch)
			}
			r.sh.watchers[key] = append(r.sh.watchers[key], w)
			w.keys = append(w.keys, watchedKey{sh: r.sh, key: key, expireAt: exp})
		}
		return nil
	})
}

func watching(ws []*Watch, w *Watch) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// Clear forgets every key of w and its changes (UNWATCH, and after EXEC or DISCARD).
// It takes the shards' locks one at a time: the caller must hold none.
func (w *Watch) Clear() {
	for _, k := range w.keys {
		k.sh.mu.Lock()
		list := k.sh.watchers[k.key]
		for i, x := range list {
			if x == w {
				list[i] = list[len(list)-1]
				list[len(list)-1] = nil
				list = list[:len(list)-1]
				break
			}
		}
		if len(list) == 0 {
			delete(k.sh.watchers, k.key)
		} else {
			k.sh.watchers[k.key] = list
		}
		k.sh.mu.Unlock()
	}
	if cap(w.keys) > 1024 {
		w.keys = nil
	} else {
		w.keys = w.keys[:0]
	}
	w.dirty.Store(false)
}

// changed reports whether a key of w changed since it was watched, at nowMs: its flag,
// or the TTL of a key alive when watched passed.
func (w *Watch) changed(nowMs int64) bool {
	if w.dirty.Load() {
		return true
	}
	for _, k := range w.keys {
		if k.expireAt != 0 && nowMs > k.expireAt {
			return true
		}
	}
	return false
}

// Changed reports whether a key of w changed since it was watched, now.
func (kv *KV) Changed(w *Watch) bool { return w.changed(kv.clock.NowMs()) }

// Changed reports whether a key of w changed since it was watched, at the step's instant:
// inside the step, no change to the step's own keys can come between this check and the
// step's writes.
func (tx *Tx) Changed(w *Watch) bool { return w.changed(tx.now) }
