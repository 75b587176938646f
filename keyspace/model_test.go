package keyspace_test

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// Model tests: each data type's operations, read from fuzz bytes, run on the keyspace and
// on a plain reference model (maps and slices), and every read is compared. At the end
// the key is saved and restored (Records, Restore) and compared again, and deleting it
// gives back every byte it charged. The seeds run as ordinary tests in CI; `go test
// -fuzz FuzzZSet ./keyspace` explores further.

// ops reads operations from fuzz bytes.
type ops struct{ b []byte }

func (o *ops) more() bool { return len(o.b) > 0 }

func (o *ops) byte() byte {
	if len(o.b) == 0 {
		return 0
	}
	c := o.b[0]
	o.b = o.b[1:]
	return c
}

// member is one of a few names, so that operations meet the same members.
func (o *ops) member() []byte { return []byte("m" + strconv.Itoa(int(o.byte()%12))) }

// score is a small number, now and then fractional, negative or infinite.
func (o *ops) score() float64 {
	switch c := o.byte(); {
	case c == 255:
		return math.Inf(1)
	case c == 254:
		return math.Inf(-1)
	case c >= 200:
		return float64(int(c)-220) / 4
	default:
		return float64(c % 16)
	}
}

// index is a Redis index: from -8 to 7.
func (o *ops) index() int { return int(o.byte()%16) - 8 }

// modelKV makes a keyspace on a manual clock with its own gauge.
func modelKV() (*keyspace.KV, func() int64) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{})
	return eng.KV(), func() int64 { return eng.Stats().MemoryBytes }
}

// run runs fn on key "k".
func run(t *testing.T, kv *keyspace.KV, fn func(tx *keyspace.Tx) error) {
	t.Helper()
	if err := kv.Do("default", [][]byte{[]byte("k")}, fn); err != nil {
		t.Fatal(err)
	}
}

// roundTrip saves kv's records and restores them in a new keyspace.
func roundTrip(t *testing.T, kv *keyspace.KV) *keyspace.KV {
	t.Helper()
	var recs []keyspace.Record
	kv.Records(func(r keyspace.Record) bool { recs = append(recs, r); return true })
	kv2, _ := modelKV()
	if loaded, dropped := kv2.Restore(recs); loaded != len(recs) || dropped != 0 {
		t.Fatalf("restore: %d loaded, %d dropped of %d", loaded, dropped, len(recs))
	}
	released(t, kv2, func() int64 { return 0 }) // the restored key is counted as a collection
	return roundTripKV(recs)
}

// roundTripKV restores recs in a new keyspace.
func roundTripKV(recs []keyspace.Record) *keyspace.KV {
	kv, _ := modelKV()
	kv.Restore(recs)
	return kv
}

// released checks that deleting "k" leaves the gauge at zero, and that StringsOnly
// tells a collection key from none.
func released(t *testing.T, kv *keyspace.KV, mem func() int64) {
	t.Helper()
	run(t, kv, func(tx *keyspace.Tx) error {
		if only := tx.StringsOnly(); only != (tx.Kind(0) == keyspace.KindNone) {
			t.Fatalf("StringsOnly %v with a key of kind %v", only, tx.Kind(0))
		}
		tx.Del(0)
		if !tx.StringsOnly() {
			t.Fatal("StringsOnly false after DEL of the only key")
		}
		return nil
	})
	if m := mem(); m != 0 {
		t.Fatalf("%d bytes still charged after DEL", m)
	}
}

// norm turns Redis's start/stop indexes into 0-based inclusive bounds within n, ok false
// when the range is empty.
func norm(start, stop, n int) (int, int, bool) {
	if start < 0 {
		start = max(start+n, 0)
	}
	if stop < 0 {
		stop += n
	}
	stop = min(stop, n-1)
	return start, stop, start <= stop && start < n
}

type zPair struct {
	m string
	s float64
}

func zSorted(m map[string]float64) []zPair {
	out := make([]zPair, 0, len(m))
	for k, v := range m {
		out = append(out, zPair{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].s < out[j].s || (out[i].s == out[j].s && out[i].m < out[j].m)
	})
	return out
}

func zDump(z *keyspace.ZSet) []zPair {
	var out []zPair
	if z != nil && z.Len() > 0 {
		z.RangeByRank(0, z.Len()-1, false, func(m string, s float64) { out = append(out, zPair{m, s}) })
	}
	return out
}

func zSeeds(f *testing.F) {
	f.Add([]byte{0, 1, 3, 0, 2, 5, 0, 3, 1, 2, 4, 5, 6, 5, 9, 3, 1})
	f.Add([]byte{0, 1, 1, 0, 2, 1, 0, 3, 1, 7, 0, 2, 4, 0, 5, 8, 9, 1, 8, 4, 6})
	f.Add([]byte{0, 1, 255, 0, 2, 254, 0, 3, 210, 1, 2, 2, 4, 230, 240, 3, 2, 5, 0, 15, 6, 7, 8, 9})
	var long []byte
	for i := range 600 {
		long = append(long, byte(i%10), byte(i*7), byte(i*13))
	}
	f.Add(long)
}

// FuzzZSet checks sorted sets against a map sorted on each read.
func FuzzZSet(f *testing.F) {
	zSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, mem := modelKV()
		model := map[string]float64{}
		o := &ops{b: b}
		for o.more() {
			switch op := o.byte() % 10; op {
			case 0, 1: // ZADD with flags
				flags := []int{0, keyspace.ZAddNX, keyspace.ZAddXX, keyspace.ZAddGT, keyspace.ZAddLT, keyspace.ZAddIncr}[int(o.byte())%6]
				m, s := o.member(), o.score()
				var got keyspace.ZAddResult
				run(t, kv, func(tx *keyspace.Tx) error {
					var err error
					got, err = tx.ZAdd(0, flags, []float64{s}, [][]byte{m})
					if err == keyspace.ErrScoreNaN {
						return nil
					}
					return err
				})
				old, exists := model[string(m)]
				ns := s
				if flags == keyspace.ZAddIncr && exists {
					ns = old + s
				}
				switch {
				case math.IsNaN(ns):
				case flags == keyspace.ZAddNX && exists, flags == keyspace.ZAddXX && !exists:
				case exists && flags == keyspace.ZAddGT && ns <= old, exists && flags == keyspace.ZAddLT && ns >= old:
				default:
					model[string(m)] = ns
				}
				_ = got
			case 2: // ZREM
				m := o.member()
				var n int
				run(t, kv, func(tx *keyspace.Tx) error { var err error; n, err = tx.ZRem(0, [][]byte{m}); return err })
				_, had := model[string(m)]
				delete(model, string(m))
				if (n == 1) != had {
					t.Fatalf("ZREM %s = %d, model had it: %v", m, n, had)
				}
			case 3: // ZREMRANGEBYSCORE
				lo, hi := keyspace.ScoreBound{V: o.score(), Excl: o.byte()%2 == 0}, keyspace.ScoreBound{V: o.score(), Excl: o.byte()%2 == 0}
				var n int
				run(t, kv, func(tx *keyspace.Tx) error { var err error; n, err = tx.ZRemRangeByScore(0, lo, hi); return err })
				want := 0
				for m, s := range model {
					if inRange(s, lo, hi) {
						delete(model, m)
						want++
					}
				}
				if n != want {
					t.Fatalf("ZREMRANGEBYSCORE %v %v = %d, want %d", lo, hi, n, want)
				}
			case 4: // ZREMRANGEBYRANK
				start, stop := o.index(), o.index()
				sorted := zSorted(model)
				s, e, ok := norm(start, stop, len(sorted))
				var n int
				run(t, kv, func(tx *keyspace.Tx) error {
					if !ok {
						return nil
					}
					var err error
					n, err = tx.ZRemRangeByRank(0, s, e)
					return err
				})
				if ok {
					for _, p := range sorted[s : e+1] {
						delete(model, p.m)
					}
					if n != e-s+1 {
						t.Fatalf("ZREMRANGEBYRANK %d %d = %d", s, e, n)
					}
				}
			case 5: // ZCOUNT, ZRANGEBYSCORE with LIMIT, both directions
				lo, hi := keyspace.ScoreBound{V: o.score(), Excl: o.byte()%2 == 0}, keyspace.ScoreBound{V: o.score(), Excl: o.byte()%2 == 0}
				rev := o.byte()%2 == 0
				offset, count := int(o.byte()%4), int(o.byte()%5)-1
				var in []zPair
				for _, p := range zSorted(model) {
					if inRange(p.s, lo, hi) {
						in = append(in, p)
					}
				}
				if rev {
					slices.Reverse(in)
				}
				want := in[min(offset, len(in)):]
				if count >= 0 {
					want = want[:min(count, len(want))]
				}
				var gotN int
				var got []zPair
				run(t, kv, func(tx *keyspace.Tx) error {
					z, err := tx.ZSet(0)
					if z != nil {
						gotN = z.Count(lo, hi)
						z.RangeByScore(lo, hi, rev, offset, count, func(m string, s float64) { got = append(got, zPair{m, s}) })
					}
					return err
				})
				if gotN != len(in) || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("range %v %v rev %v limit %d %d: count %d, %v; want %d, %v", lo, hi, rev, offset, count, gotN, got, len(in), want)
				}
			case 6: // ZRANK, ZREVRANK, ZSCORE
				m := o.member()
				sorted := zSorted(model)
				want := slices.IndexFunc(sorted, func(p zPair) bool { return p.m == string(m) })
				run(t, kv, func(tx *keyspace.Tx) error {
					z, err := tx.ZSet(0)
					if z == nil {
						if want >= 0 {
							t.Fatalf("no key, model has %s", m)
						}
						return err
					}
					r, ok := z.Rank(string(m), false)
					rr, _ := z.Rank(string(m), true)
					s, _ := z.Score(string(m))
					if ok != (want >= 0) || (ok && (r != want || rr != len(sorted)-1-want || s != sorted[want].s)) {
						t.Fatalf("rank of %s: %d %d %v %v; model %d", m, r, rr, s, ok, want)
					}
					return nil
				})
			default: // ZRANGE by rank, both directions
				start, stop, rev := o.index(), o.index(), o.byte()%2 == 0
				sorted := zSorted(model)
				if rev {
					slices.Reverse(sorted)
				}
				var want, got []zPair
				s, e, ok := norm(start, stop, len(sorted))
				if ok {
					want = sorted[s : e+1]
				}
				run(t, kv, func(tx *keyspace.Tx) error {
					z, err := tx.ZSet(0)
					if z != nil && ok {
						z.RangeByRank(s, e, rev, func(m string, sc float64) { got = append(got, zPair{m, sc}) })
					}
					return err
				})
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("ZRANGE %d %d rev %v: %v, want %v", start, stop, rev, got, want)
				}
			}
			checkZ(t, kv, model)
		}
		checkZ(t, roundTrip(t, kv), model)
		released(t, kv, mem)
	})
}

func inRange(s float64, lo, hi keyspace.ScoreBound) bool {
	return (s > lo.V || (!lo.Excl && s == lo.V)) && (s < hi.V || (!hi.Excl && s == hi.V))
}

func checkZ(t *testing.T, kv *keyspace.KV, model map[string]float64) {
	t.Helper()
	run(t, kv, func(tx *keyspace.Tx) error {
		z, err := tx.ZSet(0)
		if got, want := zDump(z), zSorted(model); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("zset %v, model %v", got, want)
		}
		if (z == nil) != (len(model) == 0) || (len(model) == 0 && tx.Kind(0) != keyspace.KindNone) {
			t.Fatalf("an empty zset must be no key: %v", tx.Kind(0))
		}
		return err
	})
}

// FuzzHash checks hashes against a map and a slice of field names in insertion order.
func FuzzHash(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 3, 4, 1, 1, 2, 1, 0, 5, 3, 3, 4, 1, 0})
	f.Add([]byte{0, 1, 1, 4, 1, 7, 5, 1, 2, 3, 1, 1, 0, 1, 1, 2, 1, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, mem := modelKV()
		vals := map[string]string{}
		var order []string
		o := &ops{b: b}
		for o.more() {
			switch o.byte() % 6 {
			case 0, 1: // HSET
				f, v := o.member(), []byte(strconv.Itoa(int(o.byte())))
				run(t, kv, func(tx *keyspace.Tx) error { _, err := tx.HSet(0, [][]byte{f, v}); return err })
				if _, ok := vals[string(f)]; !ok {
					order = append(order, string(f))
				}
				vals[string(f)] = string(v)
			case 2: // HDEL
				f := o.member()
				var n int
				run(t, kv, func(tx *keyspace.Tx) error { var err error; n, err = tx.HDel(0, [][]byte{f}); return err })
				if _, ok := vals[string(f)]; ok != (n == 1) {
					t.Fatalf("HDEL %s = %d", f, n)
				}
				delete(vals, string(f))
				order = slices.DeleteFunc(order, func(s string) bool { return s == string(f) })
			case 3: // HSETNX
				f, v := o.member(), []byte("nx")
				run(t, kv, func(tx *keyspace.Tx) error { _, err := tx.HSetNX(0, f, v); return err })
				if _, ok := vals[string(f)]; !ok {
					vals[string(f)] = "nx"
					order = append(order, string(f))
				}
			case 4: // HINCRBY (a field holding "nx" is not an integer)
				f, d := o.member(), int64(o.byte())-128
				var err error
				run(t, kv, func(tx *keyspace.Tx) error { _, err = tx.HIncrBy(0, f, d); return nil })
				cur, ok := vals[string(f)]
				n, isInt := int64(0), true
				if ok {
					var e error
					n, e = strconv.ParseInt(cur, 10, 64)
					isInt = e == nil
				}
				if isInt != (err == nil) {
					t.Fatalf("HINCRBY %s on %q: %v", f, cur, err)
				}
				if isInt {
					if !ok {
						order = append(order, string(f))
					}
					vals[string(f)] = strconv.FormatInt(n+d, 10)
				}
			default: // HINCRBYFLOAT
				f := o.member()
				var got []byte
				var err error
				run(t, kv, func(tx *keyspace.Tx) error { got, err = tx.HIncrByFloat(0, f, []byte("0.1")); return nil })
				cur, ok := vals[string(f)]
				if ok && cur == "nx" {
					if err != keyspace.ErrHashNotFloat {
						t.Fatalf("HINCRBYFLOAT on %q: %v", cur, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					order = append(order, string(f))
				}
				vals[string(f)] = string(got)
			}
			checkHash(t, kv, vals, order)
		}
		checkHash(t, roundTrip(t, kv), vals, order)
		released(t, kv, mem)
	})
}

func checkHash(t *testing.T, kv *keyspace.KV, vals map[string]string, order []string) {
	t.Helper()
	run(t, kv, func(tx *keyspace.Tx) error {
		h, err := tx.Hash(0)
		var got []string
		if h != nil {
			h.Each(func(f, v string) bool { got = append(got, f+"="+v); return true })
		}
		var want []string
		for _, f := range order {
			want = append(want, f+"="+vals[f])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || (h == nil) != (len(vals) == 0) {
			t.Fatalf("hash %v, model %v", got, want)
		}
		return err
	})
}

// FuzzList checks lists against a slice.
func FuzzList(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 3, 2, 1, 3, 0, 4, 2, 5, 1, 6, 0, 7, 1, 8, 3})
	f.Add([]byte{1, 1, 1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1, 7, 1, 8, 1, 9, 1, 1, 4, 7, 8, 6, 5, 3, 2})
	var long []byte
	for i := range 300 {
		long = append(long, byte(i%9), byte(i*5), byte(i*11))
	}
	f.Add(long)
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, mem := modelKV()
		var model []string
		o := &ops{b: b}
		for o.more() {
			switch o.byte() % 9 {
			case 0, 1: // LPUSH, RPUSH
				left, v := o.byte()%2 == 0, o.member()
				run(t, kv, func(tx *keyspace.Tx) error { _, err := tx.LPush(0, left, [][]byte{v}); return err })
				if left {
					model = append([]string{string(v)}, model...)
				} else {
					model = append(model, string(v))
				}
			case 2: // LPOP, RPOP with count
				left, n := o.byte()%2 == 0, int(o.byte()%4)
				var got []string
				run(t, kv, func(tx *keyspace.Tx) error { var err error; got, err = tx.LPop(0, left, n); return err })
				var want []string
				for range min(n, len(model)) {
					if left {
						want, model = append(want, model[0]), model[1:]
					} else {
						want, model = append(want, model[len(model)-1]), model[:len(model)-1]
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("pop %v %d: %v, want %v", left, n, got, want)
				}
			case 3: // LTRIM
				start, stop := o.index(), o.index()
				s, e, ok := norm(start, stop, len(model))
				run(t, kv, func(tx *keyspace.Tx) error {
					if !ok {
						return tx.LTrim(0, 1, 0)
					}
					return tx.LTrim(0, s, e)
				})
				if ok {
					model = append([]string(nil), model[s:e+1]...)
				} else {
					model = nil
				}
			case 4: // LSET
				idx, v := o.index(), o.member()
				var err error
				run(t, kv, func(tx *keyspace.Tx) error { err = tx.LSet(0, idx, v); return nil })
				j := idx
				if j < 0 {
					j += len(model)
				}
				switch {
				case len(model) == 0:
					if err != keyspace.ErrNoSuchKey {
						t.Fatalf("LSET on no key: %v", err)
					}
				case j < 0 || j >= len(model):
					if err != keyspace.ErrIndexRange {
						t.Fatalf("LSET %d of %d: %v", idx, len(model), err)
					}
				default:
					model[j] = string(v)
				}
			case 5: // LREM
				count, v := int(o.byte()%5)-2, o.member()
				var n int
				run(t, kv, func(tx *keyspace.Tx) error { var err error; n, err = tx.LRem(0, count, v); return err })
				want := 0
				var kept []string
				if count >= 0 {
					for _, e := range model {
						if e == string(v) && (count == 0 || want < count) {
							want++
							continue
						}
						kept = append(kept, e)
					}
				} else {
					for j := len(model) - 1; j >= 0; j-- {
						if model[j] == string(v) && want < -count {
							want++
							continue
						}
						kept = append([]string{model[j]}, kept...)
					}
				}
				model = kept
				if n != want {
					t.Fatalf("LREM %d %s = %d, want %d", count, v, n, want)
				}
			default: // LINDEX, LRANGE
				start, stop := o.index(), o.index()
				s, e, ok := norm(start, stop, len(model))
				run(t, kv, func(tx *keyspace.Tx) error {
					l, err := tx.List(0)
					var got []string
					if l != nil && ok {
						l.Range(s, e, func(v string) { got = append(got, v) })
					}
					var want []string
					if ok {
						want = model[s : e+1]
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("LRANGE %d %d: %v, want %v", start, stop, got, want)
					}
					return err
				})
			}
			checkList(t, kv, model)
		}
		checkList(t, roundTrip(t, kv), model)
		released(t, kv, mem)
	})
}

func checkList(t *testing.T, kv *keyspace.KV, model []string) {
	t.Helper()
	run(t, kv, func(tx *keyspace.Tx) error {
		l, err := tx.List(0)
		var got []string
		if l != nil {
			for j := range l.Len() {
				got = append(got, l.Index(j))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(model) || (l == nil) != (len(model) == 0) {
			t.Fatalf("list %v, model %v", got, model)
		}
		return err
	})
}

// FuzzSet checks sets against a map.
func FuzzSet(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 3, 1, 2, 1, 3, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, mem := modelKV()
		model := map[string]bool{}
		o := &ops{b: b}
		for o.more() {
			add, m := o.byte()%2 == 0, o.member()
			var n int
			run(t, kv, func(tx *keyspace.Tx) error {
				var err error
				if add {
					n, err = tx.SAdd(0, [][]byte{m, m})
				} else {
					n, err = tx.SRem(0, [][]byte{m})
				}
				return err
			})
			if want := model[string(m)] != add; (n == 1) != want {
				t.Fatalf("add %v %s = %d", add, m, n)
			}
			if add {
				model[string(m)] = true
			} else {
				delete(model, string(m))
			}
			checkSet(t, kv, model)
		}
		checkSet(t, roundTrip(t, kv), model)
		released(t, kv, mem)
	})
}

func checkSet(t *testing.T, kv *keyspace.KV, model map[string]bool) {
	t.Helper()
	run(t, kv, func(tx *keyspace.Tx) error {
		s, err := tx.SetOf(0)
		var got, want []string
		if s != nil {
			got = s.Members()
		}
		for m := range model {
			want = append(want, m)
		}
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) || (s == nil) != (len(model) == 0) {
			t.Fatalf("set %v, model %v", got, want)
		}
		return err
	})
}

// TestTypesWrongTypeAndBounds: each type refuses the others' operations, SET replaces any
// type, and a write past a bound is refused with its error, changing nothing.
func TestTypesWrongTypeAndBounds(t *testing.T) {
	kv, mem := modelKV()
	run(t, kv, func(tx *keyspace.Tx) error { _, err := tx.ZAdd(0, 0, []float64{1}, [][]byte{[]byte("a")}); return err })
	errs := []error{}
	run(t, kv, func(tx *keyspace.Tx) error {
		_, e1 := tx.HSet(0, [][]byte{[]byte("f"), []byte("v")})
		_, e2 := tx.LPush(0, true, [][]byte{[]byte("x")})
		_, e3 := tx.SAdd(0, [][]byte{[]byte("x")})
		_, e4 := tx.IncrBy(0, 1)
		_, e5 := tx.IncrByFloat(0, []byte("1"))
		_, e6 := tx.Hash(0)
		errs = append(errs, e1, e2, e3, e4, e5, e6)
		if v, ok := tx.Get(0); ok || v != nil || tx.Kind(0) != keyspace.KindZSet {
			t.Fatalf("Get on a zset: %q %v, kind %v", v, ok, tx.Kind(0))
		}
		return nil
	})
	for i, e := range errs {
		if e != keyspace.ErrWrongType {
			t.Errorf("op %d on a zset: %v", i, e)
		}
	}
	run(t, kv, func(tx *keyspace.Tx) error { return tx.Set(0, []byte("s"), 0) })
	run(t, kv, func(tx *keyspace.Tx) error {
		if tx.Kind(0) != keyspace.KindString {
			t.Fatalf("SET over a zset: %v", tx.Kind(0))
		}
		if _, err := tx.SAdd(0, [][]byte{make([]byte, keyspace.MaxValue+1)}); err != keyspace.ErrWrongType {
			t.Fatalf("SADD on a string: %v", err)
		}
		tx.Del(0)
		if _, err := tx.SAdd(0, [][]byte{make([]byte, keyspace.MaxValue+1)}); err != keyspace.ErrValueTooLarge {
			t.Fatalf("an element past MaxValue: %v", err)
		}
		many := make([][]byte, keyspace.MaxElements+1)
		for j := range many {
			many[j] = []byte{byte(j)}
		}
		if _, err := tx.SAdd(0, many); err != keyspace.ErrTooManyElements || tx.Kind(0) != keyspace.KindNone {
			t.Fatalf("past MaxElements: %v, kind %v", err, tx.Kind(0))
		}
		return nil
	})
	if m := mem(); m != 0 {
		t.Fatalf("%d bytes charged with no key", m)
	}
	// The memory bound refuses a growth and keeps the key as it was.
	small := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 4 << 10})
	var err error
	added := 0
	for err == nil {
		err = small.KV().Do("default", [][]byte{[]byte("z")}, func(tx *keyspace.Tx) error {
			_, err := tx.ZAdd(0, 0, []float64{float64(added)}, [][]byte{[]byte(strconv.Itoa(added))})
			return err
		})
		if err == nil {
			added++
		}
	}
	if err != keyspace.ErrFull || added == 0 {
		t.Fatalf("after %d members: %v", added, err)
	}
	_ = small.KV().Do("default", [][]byte{[]byte("z")}, func(tx *keyspace.Tx) error {
		if z, _ := tx.ZSet(0); z.Len() != added {
			t.Fatalf("%d members after the refusal, want %d", z.Len(), added)
		}
		return nil
	})
}
