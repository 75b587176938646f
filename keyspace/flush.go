package keyspace

import "strings"

// FLUSHALL and FLUSHDB: a workspace's keys all go at once. A flush runs in a step that
// holds every shard (DoAll), so that it is one atomic step among the others, also inside
// a transaction that touches other keys; each key removed is a change to its watchers, as
// any DEL (Redis's FLUSHALL touches every watched key that exists).

// DoAll is Do holding every shard, not only those of keys: fn may call Flush. It costs
// 64 locks: the flush commands use it, not the hot paths.
func (kv *KV) DoAll(ws string, keys [][]byte, fn func(tx *Tx) error) error {
	return kv.do(ws, keys, true, fn)
}

// DoMaybeAll is DoAll when all, else Do.
func (kv *KV) DoMaybeAll(ws string, keys [][]byte, all bool, fn func(tx *Tx) error) error {
	return kv.do(ws, keys, all, fn)
}

// Flush removes every key of the step's workspace and returns how many it removed
// (expired ones not yet dropped included, as Redis's dbsize counts them). The step must
// hold every shard (DoAll); in a step of Do it removes nothing and returns -1.
func (tx *Tx) Flush() int64 {
	for _, w := range tx.held {
		if w != ^uint64(0) {
			return -1
		}
	}
	prefix := string(AppendName(nil, tx.ws)) // prefix-free: no other workspace's keys start so
	var n int64
	for i := range tx.kv.shards {
		sh := &tx.kv.shards[i]
		for p := len(sh.entries) - 1; p >= 0; p-- { // backwards: a delete moves a visited entry
			if strings.HasPrefix(sh.entries[p].key, prefix) {
				tx.kv.remove(sh, int32(p))
				n++
			}
		}
	}
	if n > 0 {
		tx.wrote = true
	}
	return n
}
