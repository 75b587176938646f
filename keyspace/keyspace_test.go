package keyspace_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testmem"
	"github.com/ratchet/ratchet/keyspace"
)

func newKV(maxBytes int64) (*engine.Engine, *keyspace.KV, *engine.ManualClock) {
	clock := engine.NewManualClock(1_000_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: maxBytes})
	return eng, eng.KV(), clock
}

// one runs fn on key k of the default workspace.
func one(kv *keyspace.KV, k string, fn func(tx *keyspace.Tx) error) error {
	return kv.Do("default", [][]byte{[]byte(k)}, fn)
}

func get(kv *keyspace.KV, ws, k string) (string, bool) {
	var v string
	var ok bool
	_ = kv.Do(ws, [][]byte{[]byte(k)}, func(tx *keyspace.Tx) error {
		b, found := tx.Get(0)
		v, ok = string(b), found
		return nil
	})
	return v, ok
}

func TestKVSetGetTTL(t *testing.T) {
	_, kv, clock := newKV(0)
	if err := one(kv, "a", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("v1"), tx.Now()+1500) }); err != nil {
		t.Fatal(err)
	}
	pttl := func() int64 {
		var p int64
		_ = one(kv, "a", func(tx *keyspace.Tx) error { p = tx.PTTL(0); return nil })
		return p
	}
	if v, ok := get(kv, "default", "a"); !ok || v != "v1" || pttl() != 1500 {
		t.Fatalf("get %q %v pttl %d", v, ok, pttl())
	}
	clock.Advance(1500) // at the expiry millisecond the key is still there, as in Redis
	if _, ok := get(kv, "default", "a"); !ok || pttl() != 0 {
		t.Fatalf("at expiry: ok %v pttl %d", ok, pttl())
	}
	clock.Advance(1)
	if _, ok := get(kv, "default", "a"); ok || pttl() != -2 || kv.Keys() != 0 || kv.Expired() != 1 {
		t.Fatalf("after expiry: ok %v pttl %d keys %d expired %d", ok, pttl(), kv.Keys(), kv.Expired())
	}
	// No expiry; KEEPTTL keeps one; an expiry in the past leaves no key.
	_ = one(kv, "b", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("x"), 0) })
	if pttl := func() int64 {
		var p int64
		_ = one(kv, "b", func(tx *keyspace.Tx) error { p = tx.PTTL(0); return nil })
		return p
	}(); pttl != -1 {
		t.Fatalf("no expiry: pttl %d", pttl)
	}
	_ = one(kv, "b", func(tx *keyspace.Tx) error {
		tx.SetExpireAt(0, tx.Now()+100)
		if err := tx.SetKeepTTL(0, []byte("y")); err != nil {
			return err
		}
		if tx.PTTL(0) != 100 {
			return fmt.Errorf("keepttl lost the TTL: %d", tx.PTTL(0))
		}
		if err := tx.Set(0, []byte("z"), tx.Now()-1); err != nil || tx.Exists(0) {
			return fmt.Errorf("set in the past: %v exists %v", err, tx.Exists(0))
		}
		return nil
	})
	if _, ok := get(kv, "default", "b"); ok {
		t.Fatal("key set with a past expiry exists")
	}
}

func TestKVIncrBy(t *testing.T) {
	_, kv, _ := newKV(0)
	incr := func(k string, d int64) (int64, error) {
		var n int64
		err := one(kv, k, func(tx *keyspace.Tx) error {
			var err error
			n, err = tx.IncrBy(0, d)
			return err
		})
		return n, err
	}
	if n, err := incr("c", 5); n != 5 || err != nil {
		t.Fatalf("new key: %d %v", n, err)
	}
	_ = one(kv, "c", func(tx *keyspace.Tx) error { tx.SetExpireAt(0, tx.Now()+10_000); return nil })
	if n, err := incr("c", -7); n != -2 || err != nil {
		t.Fatalf("decrement: %d %v", n, err)
	}
	_ = one(kv, "c", func(tx *keyspace.Tx) error {
		if tx.PTTL(0) != 10_000 {
			t.Errorf("INCRBY changed the TTL: %d", tx.PTTL(0))
		}
		return nil
	})
	_ = one(kv, "big", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("9223372036854775806"), 0) })
	if _, err := incr("big", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := incr("big", 1); !errors.Is(err, keyspace.ErrOverflow) {
		t.Fatalf("overflow: %v", err)
	}
	if v, _ := get(kv, "default", "big"); v != "9223372036854775807" {
		t.Fatalf("after a refused overflow: %q", v)
	}
	for _, bad := range []string{"", "abc", "1.5", " 1", "+1", "01", "-0", "9223372036854775808", "1e3"} {
		_ = one(kv, "s", func(tx *keyspace.Tx) error { return tx.Set(0, []byte(bad), 0) })
		if _, err := incr("s", 1); !errors.Is(err, keyspace.ErrNotInteger) {
			t.Errorf("INCRBY on %q: %v", bad, err)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, c := range []struct {
		in string
		v  int64
		ok bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"-7", -7, true}, {"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true}, {"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false}, {"99999999999999999999", 0, false}, {"", 0, false}, {"-", 0, false},
		{"-0", 0, false}, {"00", 0, false}, {"+1", 0, false}, {"1 ", 0, false}, {"123456789012345678901", 0, false},
	} {
		v, ok := keyspace.ParseInt([]byte(c.in))
		if v != c.v || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.in, v, ok, c.v, c.ok)
		}
	}
}

func TestKVWorkspacesAndDel(t *testing.T) {
	_, kv, clock := newKV(0)
	_ = kv.Do("default", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("d"), 0) })
	_ = kv.Do("t1", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("t"), 0) })
	if v, _ := get(kv, "default", "k"); v != "d" {
		t.Fatalf("default sees %q", v)
	}
	if v, _ := get(kv, "t1", "k"); v != "t" {
		t.Fatalf("t1 sees %q", v)
	}
	if _, ok := get(kv, "t2", "k"); ok {
		t.Fatal("t2 sees a key")
	}
	var deleted int
	_ = kv.Do("default", [][]byte{[]byte("k"), []byte("k"), []byte("none")}, func(tx *keyspace.Tx) error {
		for i := range tx.Len() {
			if tx.Del(i) {
				deleted++
			}
		}
		return nil
	})
	if deleted != 1 {
		t.Fatalf("deleted %d", deleted)
	}
	if _, ok := get(kv, "t1", "k"); !ok {
		t.Fatal("DEL in default deleted t1's key")
	}
	// SetExpireAt at or before now deletes, as EXPIRE does.
	_ = kv.Do("t1", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error {
		if !tx.SetExpireAt(0, clock.NowMs()) || tx.Exists(0) {
			t.Error("EXPIRE to now kept the key")
		}
		if tx.SetExpireAt(0, 0) {
			t.Error("SetExpireAt on a missing key reported true")
		}
		return nil
	})
}

// TestKVMemoryBound: new keys are refused at --max-memory (shared with the cell store);
// existing keys keep working; deletes and sweeps give the bytes back.
func TestKVMemoryBound(t *testing.T) {
	eng, kv, clock := newKV(64 << 10)
	n := 0
	for ; n < 10_000; n++ {
		err := one(kv, fmt.Sprint("key:", n), func(tx *keyspace.Tx) error { return tx.Set(0, []byte("12345"), tx.Now()+1000) })
		if errors.Is(err, keyspace.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 || n == 10_000 {
		t.Fatalf("refused after %d keys", n)
	}
	if st := eng.Stats(); st.MemoryBytes > st.MaxMemoryBytes || st.RefusedFull != 1 || st.KVKeys != int64(n) {
		t.Fatalf("stats %+v", st)
	}
	// A tuple of a long key, which costs more than the key refused above: a short one may
	// fit in the room that key left.
	if _, err := eng.Limit(engine.Tuple{Workspace: "default", Namespace: "default", Key: bytes.Repeat([]byte("c"), 64), WindowMs: 1000}, 10, 1); !errors.Is(err, engine.ErrFull) {
		t.Fatalf("the cell store does not share the bound: %v", err)
	}
	// An existing key keeps working, even growing a few digits.
	if err := one(kv, "key:0", func(tx *keyspace.Tx) error { _, err := tx.IncrBy(0, 1_000_000_000); return err }); err != nil {
		t.Fatalf("existing key: %v", err)
	}
	if err := one(kv, "key:1", func(tx *keyspace.Tx) error { return tx.Set(0, make([]byte, 60<<10), 0) }); !errors.Is(err, keyspace.ErrFull) {
		t.Fatalf("a SET of a large value past the bound: %v", err)
	}
	clock.Advance(1001)
	if swept := kv.Sweep(); swept != int64(n) {
		t.Fatalf("swept %d of %d", swept, n)
	}
	if st := eng.Stats(); st.MemoryBytes != 0 || st.KVKeys != 0 || st.KVExpired != uint64(n) {
		t.Fatalf("after the sweep: %d bytes, %d keys", st.MemoryBytes, kv.Keys())
	}
	if err := one(kv, "again", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) }); err != nil {
		t.Fatal(err)
	}
	if err := one(kv, "big", func(tx *keyspace.Tx) error { return tx.Set(0, make([]byte, keyspace.MaxValue+1), 0) }); !errors.Is(err, keyspace.ErrValueTooLarge) {
		t.Fatalf("oversized value: %v", err)
	}
	if err := kv.Do("default", [][]byte{make([]byte, keyspace.MaxKey+1)}, func(*keyspace.Tx) error { return nil }); !errors.Is(err, keyspace.ErrKeyTooLarge) {
		t.Fatalf("oversized key: %v", err)
	}
}

func scanAll(kv *keyspace.KV, ws string, count int, between func()) []string {
	var out []string
	cursor := uint64(0)
	for {
		next, keys := kv.Scan(ws, cursor, count, nil)
		for _, k := range keys {
			out = append(out, string(k))
		}
		if next == 0 {
			return out
		}
		cursor = next
		if between != nil {
			between()
		}
	}
}

// TestKVScan: a full walk returns every key of the workspace; keys present during the
// whole walk are returned even while other keys are deleted between calls.
func TestKVScan(t *testing.T) {
	_, kv, _ := newKV(0)
	for i := range 500 {
		_ = one(kv, fmt.Sprint("stay:", i), func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) })
		_ = one(kv, fmt.Sprint("go:", i), func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) })
	}
	_ = kv.Do("other", [][]byte{[]byte("hidden")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) })
	if got := scanAll(kv, "default", 10, nil); len(got) != 1000 {
		t.Fatalf("walk returned %d keys", len(got))
	}
	deleted := 0
	got := scanAll(kv, "default", 7, func() {
		for range 3 {
			if deleted < 500 {
				_ = one(kv, fmt.Sprint("go:", deleted), func(tx *keyspace.Tx) error { tx.Del(0); return nil })
				deleted++
			}
		}
	})
	seen := map[string]bool{}
	for _, k := range got {
		seen[k] = true
	}
	for i := range 500 {
		if !seen[fmt.Sprint("stay:", i)] {
			t.Fatalf("stay:%d missed by a walk with deletes", i)
		}
	}
	if got := scanAll(kv, "other", 1, nil); len(got) != 1 || got[0] != "hidden" {
		t.Fatalf("other workspace: %v", got)
	}
	next, keys := kv.Scan("default", 1<<40, 10, nil)
	if next != 0 || len(keys) != 0 {
		t.Fatalf("cursor past the end: %d %v", next, keys)
	}
}

func TestKVRecordsRestore(t *testing.T) {
	_, kv, clock := newKV(0)
	_ = one(kv, "a", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) })
	_ = one(kv, "b", func(tx *keyspace.Tx) error { return tx.Set(0, []byte("2"), tx.Now()+5000) })
	_ = kv.Do("t", [][]byte{[]byte("a")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("3"), 0) })
	var recs []keyspace.Record
	kv.Records(func(r keyspace.Record) bool { recs = append(recs, r); return true })
	sort.Slice(recs, func(i, j int) bool { return recs[i].Workspace+recs[i].Key < recs[j].Workspace+recs[j].Key })
	str := keyspace.KindString
	want := []keyspace.Record{{"default", "a", str, []byte("1"), 0}, {"default", "b", str, []byte("2"), 1_005_000}, {"t", "a", str, []byte("3"), 0}}
	if fmt.Sprint(recs) != fmt.Sprint(want) {
		t.Fatalf("records %v", recs)
	}
	_, kv2, clock2 := newKV(0)
	clock2.Set(clock.NowMs() + 6000) // b has expired by then
	loaded, dropped := kv2.Restore(recs)
	if loaded != 2 || dropped != 1 {
		t.Fatalf("loaded %d dropped %d", loaded, dropped)
	}
	if v, _ := get(kv2, "t", "a"); v != "3" {
		t.Fatalf("restored t/a = %q", v)
	}
}

// TestKVDoAtomic: concurrent steps that increment two keys together never let another
// step see them differ.
func TestKVDoAtomic(t *testing.T) {
	_, kv, _ := newKV(0)
	keys := [][]byte{[]byte("x"), []byte("y")}
	var wg sync.WaitGroup
	var bad sync.Once
	for range 4 {
		wg.Go(func() {
			for range 500 {
				_ = kv.Do("default", keys, func(tx *keyspace.Tx) error {
					a, _ := tx.IncrBy(0, 1)
					b, _ := tx.IncrBy(1, 1)
					if a != b {
						bad.Do(func() { t.Errorf("x=%d y=%d", a, b) })
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	if v, _ := get(kv, "default", "y"); v != "2000" {
		t.Fatalf("y = %s", v)
	}
}

// TestKVScanInsideDoNoDeadlock: steps that hold a key and scan the keyspace run at once on
// several goroutines; a scan that would wait for a shard another such step holds stops
// there instead, so they all finish, and a walk resumed from its cursors still sees every
// key.
func TestKVScanInsideDoNoDeadlock(t *testing.T) {
	_, kv, _ := newKV(0)
	for i := range 200 {
		_ = one(kv, fmt.Sprint("k", i), func(tx *keyspace.Tx) error { return tx.Set(0, []byte("1"), 0) })
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 40 {
				_ = one(kv, fmt.Sprint("k", (g*53+i)%200), func(tx *keyspace.Tx) error {
					seen, cursor := 0, uint64(0)
					for range 200 {
						next, keys := tx.Scan(cursor, 50, nil)
						seen += len(keys)
						if cursor = next; cursor == 0 {
							break
						}
					}
					if cursor == 0 && seen < 200 {
						t.Errorf("a finished walk saw %d of 200 keys", seen)
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
}

// BenchmarkKVMemory fills the counter keyspace with 1M keys ("user:%08d", a counter of 1
// with a TTL), and reports the heap and resident growth per key beside the estimate that
// --max-memory counts (est-B/key). Run it with:
//
//	go test -run xxx -bench BenchmarkKVMemory -benchtime 1x ./keyspace
func BenchmarkKVMemory(b *testing.B) {
	const keys = 1_000_000
	var est float64
	testmem.MeasureCells(b, keys, func() (func(), any) {
		c := engine.NewManualClock(1_000_000)
		e := engine.New(c, engine.Config{MaxMemoryBytes: 4 << 30})
		fill := func() {
			var buf [32]byte
			k := [][]byte{nil}
			for i := range keys {
				k[0] = testmem.Key(buf[:0], i)
				if err := e.KV().Do("default", k, func(tx *keyspace.Tx) error {
					if _, err := tx.IncrBy(0, 1); err != nil {
						return err
					}
					tx.SetExpireAt(0, tx.Now()+60_000)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			est = float64(e.Stats().MemoryBytes) / keys
		}
		return fill, e
	})
	b.ReportMetric(est, "est-B/key")
}

// TestFlush: Flush removes every key of its workspace, of every type, with or without a
// TTL, gives their memory back, and leaves other workspaces' keys; in a step that does
// not hold every shard it removes nothing.
func TestFlush(t *testing.T) {
	_, kv, _ := newKV(1 << 30)
	set := func(tx *keyspace.Tx) error { return tx.Set(0, []byte("v"), 0) }
	for i := range 300 {
		k := []byte(fmt.Sprint("k", i))
		_ = kv.Do("default", [][]byte{k}, set)
		_ = kv.Do("tenant", [][]byte{k}, set)
	}
	_ = kv.Do("default", [][]byte{[]byte("z")}, func(tx *keyspace.Tx) error {
		_, err := tx.ZAdd(0, 0, []float64{1, 2}, [][]byte{[]byte("a"), []byte("b")})
		return err
	})
	_ = kv.Do("default", [][]byte{[]byte("t")}, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("v"), tx.Now()+1000) })
	before := kv.Keys()
	var n int64
	_ = kv.Do("default", [][]byte{[]byte("k1")}, func(tx *keyspace.Tx) error { n = tx.Flush(); return nil })
	if n != -1 || kv.Keys() != before {
		t.Fatalf("Flush in a step of one key removed %d (keys %d -> %d)", n, before, kv.Keys())
	}
	_ = kv.DoAll("default", nil, func(tx *keyspace.Tx) error { n = tx.Flush(); return nil })
	if n != 302 || kv.Keys() != 300 {
		t.Fatalf("Flush removed %d keys, %d left; want 302 removed, 300 left", n, kv.Keys())
	}
	if _, ok := get(kv, "default", "k1"); ok {
		t.Fatal("a flushed key is still there")
	}
	if v, ok := get(kv, "tenant", "k1"); !ok || v != "v" {
		t.Fatalf("another workspace's key after the flush: %q %v", v, ok)
	}
	_ = kv.DoAll("tenant", nil, func(tx *keyspace.Tx) error { n = tx.Flush(); return nil })
	if n != 300 || kv.Keys() != 0 {
		t.Fatalf("second Flush removed %d, %d keys left", n, kv.Keys())
	}
}
