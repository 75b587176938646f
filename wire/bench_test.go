package wire_test

import (
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/wire"
)

// BenchmarkAppendReplay encodes a 16-item replay batch into a reused buffer, as an edge's
// replay loop does.
func BenchmarkAppendReplay(b *testing.B) {
	items := make([]engine.ReplayItem, 16)
	for i := range items {
		items[i] = engine.ReplayItem{Key: key, Seq: 29000000 + int64(i), Cost: 3, Limit: 100}
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.AppendReplay(buf[:0], engine.ReplayBatch{ID: 42, Boot: 1763898912000, Items: items})
	}
}

// BenchmarkParseReplay decodes the same batch as an origin does.
func BenchmarkParseReplay(b *testing.B) {
	items := make([]engine.ReplayItem, 16)
	for i := range items {
		items[i] = engine.ReplayItem{Key: key, Seq: 29000000 + int64(i), Cost: 3, Limit: 100}
	}
	args := parse(b, wire.AppendReplay(nil, engine.ReplayBatch{ID: 42, Boot: 1763898912000, Items: items}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseReplay(args); err != nil {
			b.Fatal(err)
		}
	}
}
