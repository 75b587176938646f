package persist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// keyedRecords returns what a keyed restore of key (Opened.Parts of its part, keep keeping
// key alone, given keyHash) reads: each record as key/seq/regional, in order.
func keyedRecords(t *testing.T, o *Opened, key string, keyHash uint64) []string {
	t.Helper()
	var got []string
	p := engine.PartOf(o.Seed, key)
	_, err := o.Parts(p, p+1, nil, func(k string) bool { return k == key }, keyHash, func(recs []engine.CellRecord) {
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%s/%d/%d", r.Key, r.Seq, r.Regional))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLogKeyedRestoreMatchesFullLoad: over random delta logs (tuples changed and added
// between incremental saves, some in many frames), a keyed restore given its key's hash
// (what engine.LoadLazily's keyed access passes) reads exactly the records of its key that
// a load of every part reads, in the same order, the logs mapped or read; and one given
// the hash of another seed misses the key's records, the base's and the delta log's (the
// tags are what it goes by: keytags.go's and logSet.tags).
func TestLogKeyedRestoreMatchesFullLoad(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("read=%v", readOnly), func(t *testing.T) {
			defer func(v bool) { readLogsOnly = v }(readLogsOnly)
			readLogsOnly = readOnly
			rng := rand.New(rand.NewPCG(11, uint64(len(fmt.Sprint(readOnly)))))
			const base, tuples = 300, 600
			e := logEngine(t, base)
			dir := t.TempDir()
			s := quietStore(t, dir)
			if err := s.Write(incremental(e)); err != nil {
				t.Fatal(err)
			}
			logged := map[string]bool{} // the keys of the logs' records
			for range 8 {
				for range 150 {
					i := rng.IntN(tuples) // half of them new to the logs
					if rng.IntN(3) == 0 {
						i = rng.IntN(10) // a few hot tuples, in every frame
					}
					count(t, e, i, i+1, uint64(rng.IntN(5)+1))
					logged[string(engine.AppendKey(nil, logTuple(i)))] = true
				}
				if err := s.Write(incremental(e)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			o, err := quietStore(t, dir).OpenOrSetAside()
			if err != nil || !o.Lazy() || o.log.frames != 8 || o.log.tags == nil {
				t.Fatalf("OpenOrSetAside: %v, lazy %v, frames %d", err, o.Lazy(), o.log.frames)
			}
			defer o.Close()
			full := map[string][]string{}
			if _, err := o.Parts(0, engine.Parts, nil, nil, 0, func(recs []engine.CellRecord) {
				for _, r := range recs {
					full[r.Key] = append(full[r.Key], fmt.Sprintf("%s/%d/%d", r.Key, r.Seq, r.Regional))
				}
			}); err != nil {
				t.Fatal(err)
			}
			if len(logged) < tuples/2 || len(full) < len(logged) {
				t.Fatalf("a full load read %d keys, %d in the logs", len(full), len(logged))
			}
			for key, want := range full {
				if got := keyedRecords(t, o, key, engine.KeyHash(o.Seed, key)); !slices.Equal(got, want) {
					t.Fatalf("keyed restore of %q: %q, a full load reads %q", key, got, want)
				}
				h, other := engine.KeyHash(o.Seed, key), engine.KeyHash(o.Seed^1, key)
				if keyTag(h) == keyTag(other) || keyTag16(h) == keyTag16(other) {
					continue // a tag of the other hash is the key's (once in 65,536 keys)
				}
				if got := keyedRecords(t, o, key, other); len(got) != 0 {
					t.Fatalf("keyed restore of %q (in the logs: %v) given another seed's hash: %q, a full load reads %q", key, logged[key], got, want)
				}
			}
			for i := tuples; i < tuples+20; i++ { // keys of no record
				key := string(engine.AppendKey(nil, logTuple(i)))
				if got := keyedRecords(t, o, key, engine.KeyHash(o.Seed, key)); len(got) != 0 {
					t.Fatalf("keyed restore of %q, never counted: %q", strings.ToValidUTF8(key, "?"), got)
				}
			}
		})
	}
}
