package keyspace_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/keyspace"
)

// BenchmarkTypesMemory fills one key of each collection type with 100,000 elements of
// about 16 bytes (a sliding log's members, a moving window's timestamps) and reports the
// heap growth per element beside the estimate --max-memory counts (est-B/elem). Run it
// with:
//
//	go test -run xxx -bench BenchmarkTypesMemory -benchtime 1x ./keyspace
func BenchmarkTypesMemory(b *testing.B) {
	const n = 100_000
	fill := map[string]func(tx *keyspace.Tx, i int) error{
		"zset": func(tx *keyspace.Tx, i int) error {
			_, err := tx.ZAdd(0, 0, []float64{float64(1_700_000_000_000 + i)}, [][]byte{[]byte("req-" + strconv.Itoa(1_000_000_000+i))})
			return err
		},
		"hash": func(tx *keyspace.Tx, i int) error {
			_, err := tx.HSet(0, [][]byte{[]byte("f-" + strconv.Itoa(1_000_000_000+i)), []byte(strconv.Itoa(i))})
			return err
		},
		"list": func(tx *keyspace.Tx, i int) error {
			_, err := tx.LPush(0, false, [][]byte{[]byte(strconv.Itoa(1_700_000_000_000_000 + i))})
			return err
		},
		"set": func(tx *keyspace.Tx, i int) error {
			_, err := tx.SAdd(0, [][]byte{[]byte("m-" + strconv.Itoa(1_000_000_000+i))})
			return err
		},
	}
	for name, f := range fill {
		b.Run(name, func(b *testing.B) {
			var heap, est float64
			for b.Loop() {
				kv, mem := modelKV()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range n {
					if err := kv.Do("default", [][]byte{[]byte("k")}, func(tx *keyspace.Tx) error { return f(tx, i) }); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = float64(after.HeapAlloc-before.HeapAlloc) / n
				est = float64(mem()) / n
				runtime.KeepAlive(kv)
			}
			b.ReportMetric(heap, "heap-B/elem")
			b.ReportMetric(est, "est-B/elem")
		})
	}
}
