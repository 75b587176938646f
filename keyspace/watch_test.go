package keyspace_test

import (
	"fmt"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// TestWatch: what changes a watched key, as Redis's WATCH sees it: any write, DEL of a
// key that exists, an expiry passing (removed or not), in the watched workspace only; and
// what does not: reads, writes of other keys, a DEL of nothing, the removal of a key
// already expired when watched, and anything after Clear.
func TestWatch(t *testing.T) {
	set := func(tx *keyspace.Tx) error { return tx.Set(0, []byte("x"), 0) }
	for _, tc := range []struct {
		name    string
		setup   func(kv *keyspace.KV, clock *engine.ManualClock) // before WATCH
		between func(kv *keyspace.KV, clock *engine.ManualClock) // between WATCH and the check
		want    bool
	}{
		{name: "nothing", want: false},
		{name: "read", between: func(kv *keyspace.KV, _ *engine.ManualClock) { get(kv, "default", "w") }, want: false},
		{name: "set new", between: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) }, want: true},
		{name: "set existing", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) },
			between: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) }, want: true},
		{name: "incrby", between: func(kv *keyspace.KV, _ *engine.ManualClock) {
			_ = one(kv, "w", func(tx *keyspace.Tx) error { _, err := tx.IncrBy(0, 1); return err })
		}, want: true},
		{name: "expire", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) },
			between: func(kv *keyspace.KV, _ *engine.ManualClock) {
				_ = one(kv, "w", func(tx *keyspace.Tx) error { tx.SetExpireAt(0, tx.Now()+60_000); return nil })
			}, want: true},
		{name: "del", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) },
			between: func(kv *keyspace.KV, _ *engine.ManualClock) {
				_ = one(kv, "w", func(tx *keyspace.Tx) error { tx.Del(0); return nil })
			}, want: true},
		{name: "del of nothing", between: func(kv *keyspace.KV, _ *engine.ManualClock) {
			_ = one(kv, "w", func(tx *keyspace.Tx) error { tx.Del(0); return nil })
		}, want: false},
		{name: "created and deleted", between: func(kv *keyspace.KV, _ *engine.ManualClock) {
			_ = one(kv, "w", set)
			_ = one(kv, "w", func(tx *keyspace.Tx) error { tx.Del(0); return nil })
		}, want: true},
		{name: "ttl passes, key not yet removed", setup: setWithTTL(1000),
			between: func(_ *keyspace.KV, clock *engine.ManualClock) { clock.Advance(1001) }, want: true},
		{name: "ttl not yet passed", setup: setWithTTL(1000),
			between: func(_ *keyspace.KV, clock *engine.ManualClock) { clock.Advance(1000) }, want: false},
		{name: "expired key swept", setup: setWithTTL(1000),
			between: func(kv *keyspace.KV, clock *engine.ManualClock) {
				clock.Advance(1001)
				kv.Sweep()
				clock.Advance(-1001)
			}, want: true},
		{name: "already expired when watched, then swept", setup: func(kv *keyspace.KV, clock *engine.ManualClock) {
			setWithTTL(1000)(kv, clock)
			clock.Advance(1001)
		}, between: func(kv *keyspace.KV, _ *engine.ManualClock) { kv.Sweep() }, want: false},
		{name: "zadd", between: doW(func(tx *keyspace.Tx) error { _, err := tx.ZAdd(0, 0, []float64{1}, [][]byte{[]byte("a")}); return err }), want: true},
		{name: "zadd nx of a member", setup: doW(func(tx *keyspace.Tx) error { _, err := tx.ZAdd(0, 0, []float64{1}, [][]byte{[]byte("a")}); return err }),
			between: doW(func(tx *keyspace.Tx) error {
				_, err := tx.ZAdd(0, keyspace.ZAddNX, []float64{2}, [][]byte{[]byte("a")})
				return err
			}), want: false},
		{name: "hset", between: doW(func(tx *keyspace.Tx) error { _, err := tx.HSet(0, [][]byte{[]byte("f"), []byte("v")}); return err }), want: true},
		{name: "hdel of no field", setup: doW(func(tx *keyspace.Tx) error { _, err := tx.HSet(0, [][]byte{[]byte("f"), []byte("v")}); return err }),
			between: doW(func(tx *keyspace.Tx) error { _, err := tx.HDel(0, [][]byte{[]byte("g")}); return err }), want: false},
		{name: "lpop of the last element", setup: doW(func(tx *keyspace.Tx) error { _, err := tx.LPush(0, true, [][]byte{[]byte("x")}); return err }),
			between: doW(func(tx *keyspace.Tx) error { _, err := tx.LPop(0, true, 1); return err }), want: true},
		{name: "sadd of a member", setup: doW(func(tx *keyspace.Tx) error { _, err := tx.SAdd(0, [][]byte{[]byte("a")}); return err }),
			between: doW(func(tx *keyspace.Tx) error { _, err := tx.SAdd(0, [][]byte{[]byte("a")}); return err }), want: false},
		{name: "srem", setup: doW(func(tx *keyspace.Tx) error { _, err := tx.SAdd(0, [][]byte{[]byte("a"), []byte("b")}); return err }),
			between: doW(func(tx *keyspace.Tx) error { _, err := tx.SRem(0, [][]byte{[]byte("a")}); return err }), want: true},
		{name: "other keys", between: func(kv *keyspace.KV, _ *engine.ManualClock) {
			for i := range 500 { // some share the watched key's shard
				_ = one(kv, fmt.Sprint("other", i), set)
			}
		}, want: false},
		{name: "other workspace", between: func(kv *keyspace.KV, _ *engine.ManualClock) {
			_ = kv.Do("tenant", [][]byte{[]byte("w")}, set)
		}, want: false},
		{name: "flush", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) },
			between: flush("default"), want: true},
		{name: "flush without the key", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "x", set) },
			between: flush("default"), want: false},
		{name: "flush of another workspace", setup: func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", set) },
			between: flush("tenant"), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, kv, clock := newKV(0)
			if tc.setup != nil {
				tc.setup(kv, clock)
			}
			var w keyspace.Watch
			if err := kv.Watch(&w, "default", [][]byte{[]byte("w"), []byte("w")}); err != nil {
				t.Fatal(err)
			}
			if w.Len() != 1 {
				t.Fatalf("a key watched twice counts %d times", w.Len())
			}
			if tc.between != nil {
				tc.between(kv, clock)
			}
			if got := kv.Changed(&w); got != tc.want {
				t.Fatalf("Changed = %v, want %v", got, tc.want)
			}
			inTx := false
			_ = one(kv, "w", func(tx *keyspace.Tx) error { inTx = tx.Changed(&w); return nil })
			if inTx != tc.want {
				t.Fatalf("Tx.Changed = %v, want %v", inTx, tc.want)
			}
			w.Clear()
			_ = one(kv, "w", set)
			if kv.Changed(&w) || w.Len() != 0 {
				t.Fatalf("after Clear: changed %v, %d keys", kv.Changed(&w), w.Len())
			}
		})
	}
}

// flush is FLUSHALL in workspace ws.
func flush(ws string) func(kv *keyspace.KV, clock *engine.ManualClock) {
	return func(kv *keyspace.KV, _ *engine.ManualClock) {
		_ = kv.DoAll(ws, nil, func(tx *keyspace.Tx) error { tx.Flush(); return nil })
	}
}

// doW runs fn on the watched key "w".
func doW(fn func(tx *keyspace.Tx) error) func(kv *keyspace.KV, clock *engine.ManualClock) {
	return func(kv *keyspace.KV, _ *engine.ManualClock) { _ = one(kv, "w", fn) }
}

func setWithTTL(ms int64) func(kv *keyspace.KV, clock *engine.ManualClock) {
	return func(kv *keyspace.KV, _ *engine.ManualClock) {
		_ = one(kv, "w", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("x"), tx.Now()+ms) })
	}
}

// TestWatchSeveral: two watchers of one key are both told; clearing one leaves the other.
func TestWatchSeveral(t *testing.T) {
	_, kv, _ := newKV(0)
	var a, b keyspace.Watch
	for _, w := range []*keyspace.Watch{&a, &b} {
		if err := kv.Watch(w, "default", [][]byte{[]byte("k")}); err != nil {
			t.Fatal(err)
		}
	}
	a.Clear()
	_ = one(kv, "k", func(tx *keyspace.Tx) error { _, err := tx.IncrBy(0, 1); return err })
	if kv.Changed(&a) || !kv.Changed(&b) {
		t.Fatalf("after a.Clear and a write: a %v, b %v; want false, true", kv.Changed(&a), kv.Changed(&b))
	}
}

// microClock is a MicroClock at a fixed microsecond.
type microClock struct{ us int64 }

func (c *microClock) NowMs() int64 { return c.us / 1000 }
func (c *microClock) NowUs() int64 { return c.us }

// TestTxNowUs: a script's TIME is the clock's microseconds, and each reading of one step
// is later than the last (a burst of scripts in one MULTI never shares an instant); a
// clock with milliseconds only gives them times 1000.
func TestTxNowUs(t *testing.T) {
	mc := &microClock{us: 1_700_000_000_123_456}
	kv := engine.New(mc, engine.Config{}).KV()
	var got []int64
	_ = kv.Do("default", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error {
		for range 3 {
			got = append(got, tx.NowUs())
		}
		return nil
	})
	if fmt.Sprint(got) != "[1700000000123456 1700000000123457 1700000000123458]" {
		t.Fatalf("NowUs in one step = %v", got)
	}
	_, kv2, clock := newKV(0)
	_ = one(kv2, "k", func(tx *keyspace.Tx) error {
		if us := tx.NowUs(); us != clock.NowMs()*1000 {
			t.Fatalf("NowUs on a millisecond clock = %d, want %d", us, clock.NowMs()*1000)
		}
		return nil
	})
}
