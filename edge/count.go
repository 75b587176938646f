package edge

import (
	"math"
	"math/bits"

	"github.com/ratchet/ratchet/engine"
)

// emptySeq marks an unused cell slot of a local entry.
const emptySeq = math.MinInt64

// capCount caps n at engine.MaxCount, as the origin caps its counts.
func capCount(n uint64) uint64 { return min(n, engine.MaxCount) }

// satAdd adds without wrapping, capped at engine.MaxCount.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 || s > engine.MaxCount {
		return engine.MaxCount
	}
	return s
}
