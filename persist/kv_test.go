package persist_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/persist"
)

// kvRecords returns n keyspace records of a few workspaces with binary keys, values of 0
// to 300 bytes (some past a chunk's worth in total) and expiries of every kind.
func kvRecords(n int, seed uint64) []keyspace.Record {
	rng := rand.New(rand.NewPCG(seed, 3))
	wss := []string{"default", "acme", "", "ws\x00\xff"}
	recs := make([]keyspace.Record, n)
	for i := range recs {
		val := make([]byte, rng.IntN(300))
		for j := range val {
			val[j] = byte(rng.UintN(256))
		}
		var exp int64
		switch i % 4 {
		case 1:
			exp = 1_700_000_000_000 + rng.Int64N(1e9)
		case 2:
			exp = math.MaxInt64
		case 3:
			exp = -1 - rng.Int64N(1000) // not made by the engine; the format carries it
		}
		recs[i] = keyspace.Record{
			Workspace:  wss[i%len(wss)],
			Key:        fmt.Sprintf("k:%d\x00\xfe", i),
			Value:      val,
			ExpireAtMs: exp,
		}
	}
	return recs
}

// sameKV fails t unless got holds want's records in want's order (nil and empty values
// alike).
func sameKV(t testing.TB, got, want []keyspace.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d counter keys, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Workspace != w.Workspace || g.Key != w.Key || !bytes.Equal(g.Value, w.Value) || g.ExpireAtMs != w.ExpireAtMs {
			t.Fatalf("counter key %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestKVRoundTrip: counter keys are saved beside the cells and come back as they were, in
// one chunk or many; Save without them writes none; a later save replaces them.
func TestKVRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2_000} { // 2,000 records of ~150 bytes: several chunks
		t.Run(fmt.Sprintf("keys=%d", n), func(t *testing.T) {
			s, _ := openStore(t)
			cells := genRecords(500, uint64(n))
			kvs := kvRecords(n, uint64(n))
			if err := s.SaveAll(slices.Values(cells), slices.Values(kvs)); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.LastCells != 500 || st.LastKV != uint64(n) {
				t.Fatalf("Stats after save: %d cells, %d keys; want 500, %d", st.LastCells, st.LastKV, n)
			}
			snap := mustLoadAll(t, s)
			sameCells(t, snap.Cells, cells)
			sameKV(t, snap.KV, kvs)
			sameCells(t, mustLoad(t, s), cells)
		})
	}
	t.Run("Save writes no keys and replaces a snapshot that had some", func(t *testing.T) {
		s, _ := openStore(t)
		if err := s.SaveAll(nil, slices.Values(kvRecords(10, 1))); err != nil {
			t.Fatal(err)
		}
		if snap := mustLoadAll(t, s); len(snap.Cells) != 0 || len(snap.KV) != 10 {
			t.Fatalf("loaded %d cells, %d keys; want 0, 10", len(snap.Cells), len(snap.KV))
		}
		mustSave(t, s, genRecords(3, 1))
		if snap := mustLoadAll(t, s); len(snap.Cells) != 3 || len(snap.KV) != 0 {
			t.Fatalf("loaded %d cells, %d keys; want 3, 0", len(snap.Cells), len(snap.KV))
		}
	})
}

// TestKVEngineRoundTrip: an origin's keys (SET with and without a TTL, INCRBY,
// CL.THROTTLE's state, a hash, a sorted set with a TTL, a list, a set) are saved from keyspace.KV.Records and restored by keyspace.KV.Restore
// with their values and expiries; keys expired before the save are not written, and keys
// that expire between the save and the load are dropped at load.
func TestKVEngineRoundTrip(t *testing.T) {
	const t0 = 1_750_000_000_000
	clock := engine.NewManualClock(t0)
	e := engine.New(clock, engine.Config{MaxMemoryBytes: 64 << 20})
	kv := e.KV()
	set := func(ws, key, val string, expireAt int64) {
		t.Helper()
		if err := kv.Do(ws, [][]byte{[]byte(key)}, func(tx *keyspace.Tx) error {
			return tx.Set(0, []byte(val), expireAt)
		}); err != nil {
			t.Fatal(err)
		}
	}
	set("default", "plain", "v", 0)
	set("default", "ttl", "with ttl", t0+60_000)
	set("acme", "plain", "other workspace", 0)
	set("default", "gone", "expires before the save", t0+1_000)
	set("default", "late", "expires between save and load", t0+5_000)
	if err := kv.Do("default", [][]byte{[]byte("counter")}, func(tx *keyspace.Tx) error {
		if _, err := tx.IncrBy(0, 41); err != nil {
			return err
		}
		_, err := tx.IncrBy(0, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Throttle(kv, "default", []byte("cell"), engine.ThrottleParams{MaxBurst: 5, Count: 10, Period: 60, Quantity: 3}); err != nil {
		t.Fatal(err)
	}
	for key, write := range map[string]func(tx *keyspace.Tx) error{
		"hash": func(tx *keyspace.Tx) error {
			_, err := tx.HSet(0, [][]byte{[]byte("tokens"), []byte("9.5"), []byte("ts"), []byte("1750000000000")})
			return err
		},
		"zset": func(tx *keyspace.Tx) error {
			_, err := tx.ZAdd(0, 0, []float64{2, 1, 1}, [][]byte{[]byte("b"), []byte("a"), []byte("c")})
			tx.SetExpireAt(0, t0+60_000)
			return err
		},
		"list": func(tx *keyspace.Tx) error {
			_, err := tx.LPush(0, false, [][]byte{[]byte("x"), []byte("y")})
			return err
		},
		"set": func(tx *keyspace.Tx) error {
			_, err := tx.SAdd(0, [][]byte{[]byte("m2"), []byte("m1"), []byte("m3")})
			return err
		},
	} {
		if err := kv.Do("default", [][]byte{[]byte(key)}, write); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Limit(engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("u"), WindowMs: 3_600_000}, 100, 4); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2_000) // "gone" expired
	want := kvState(t, e)
	if _, ok := want["default/gone"]; ok {
		t.Fatal("gone still live after its expiry")
	}
	if len(want) != 10 {
		t.Fatalf("live keys before the save: %v", want)
	}

	s, _ := openStore(t)
	if err := s.SaveAll(e.Records, kv.Records); err != nil {
		t.Fatal(err)
	}
	snap := mustLoadAll(t, s)
	for _, r := range snap.KV {
		if r.Key == "gone" {
			t.Fatalf("an expired key was written: %+v", r)
		}
	}
	if len(snap.KV) != 10 {
		t.Fatalf("snapshot holds %d keys, want 10: %+v", len(snap.KV), snap.KV)
	}

	clock.Advance(4_000) // "late" expired since the save
	e2 := engine.New(clock, engine.Config{MaxMemoryBytes: 64 << 20})
	if _, _, err := e2.Restore(snap.Cells); err != nil {
		t.Fatal(err)
	}
	loaded, dropped := e2.KV().Restore(snap.KV)
	if loaded != 9 || dropped != 1 {
		t.Fatalf("KV.Restore = %d loaded, %d dropped; want 9, 1", loaded, dropped)
	}
	delete(want, "default/late")
	if got := kvState(t, e2); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored keys %v, want %v", got, want)
	}
	// The GCRA state is the same: the next CL.THROTTLE decides as the original would.
	r1, err1 := engine.Throttle(kv, "default", []byte("cell"), engine.ThrottleParams{MaxBurst: 5, Count: 10, Period: 60, Quantity: 1})
	r2, err2 := engine.Throttle(e2.KV(), "default", []byte("cell"), engine.ThrottleParams{MaxBurst: 5, Count: 10, Period: 60, Quantity: 1})
	if err1 != nil || err2 != nil || r1 != r2 {
		t.Fatalf("CL.THROTTLE after restore = %+v, %v; original %+v, %v", r2, err2, r1, err1)
	}
	if got := e2.Snapshot(); len(got) != 1 || got[0].Regional != 4 {
		t.Fatalf("restored cells %+v, want one of 4", got)
	}
}

// kvState returns the live keys of e's keyspace as "workspace/key" -> value and expiry.
func kvState(t testing.TB, e *engine.Engine) map[string]string {
	t.Helper()
	out := map[string]string{}
	for r := range e.KV().Records {
		out[r.Workspace+"/"+r.Key] = fmt.Sprintf("%v %q exp=%d", r.Kind, r.Value, r.ExpireAtMs)
	}
	return out
}

// TestRunSavesKVChanges: a counter key written while no cell changes is a change for Run
// (the engine's Changed sees keyspace writes), so the next periodic snapshot holds it.
func TestRunSavesKVChanges(t *testing.T) {
	clock := engine.NewManualClock(1_750_000_000_000)
	e := engine.New(clock, engine.Config{MaxMemoryBytes: 64 << 20})
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		persist.Run(ctx, s, persist.Source{Cells: e.Records, KV: e.KV().Records}, e.Changed, 5*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()
	_ = e.Changed() // whatever New marked: from here on only the keyspace changes
	for i := range 3 {
		want := fmt.Sprintf("v%d", i)
		if err := e.KV().Do("default", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error {
			return tx.Set(0, []byte(want), 0)
		}); err != nil {
			t.Fatal(err)
		}
		testwait.UntilTrue(t, waitFor, "a snapshot holding "+want, func() bool {
			snap, err := s.LoadAll()
			return err == nil && len(snap.KV) == 1 && string(snap.KV[0].Value) == want
		})
	}
}
