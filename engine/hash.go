package engine

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// The store's hash of a tuple key: wyhash (final version 4), keyed by a 64-bit seed. Unlike
// hash/maphash's, the seed is a number: a snapshot records it and the next process adopts
// it (Engine.AdoptShardSeed), so that a snapshot written shard by shard is read back shard
// by shard, each tuple in the shard it was saved from (Engine.LoadLazily). The seed is
// random, as maphash's, so that keys chosen to collide in one shard cannot be guessed.

const (
	wyp0 = 0xa0761d6478bd642f
	wyp1 = 0xe7037ed1a0b428db
)

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hashKey returns the 64-bit hash of key under seed.
func hashKey[T string | []byte](seed uint64, key T) uint64 {
	n := len(key)
	seed ^= wymix(seed^wyp0, wyp1)
	var a, b uint64
	switch {
	case n == 0:
	case n < 4:
		a = uint64(key[0])<<16 | uint64(key[n>>1])<<8 | uint64(key[n-1])
	case n <= 16:
		q := (n >> 3) << 2
		a = uint64(le32(key[0:]))<<32 | uint64(le32(key[q:]))
		b = uint64(le32(key[n-4:]))<<32 | uint64(le32(key[n-4-q:]))
	default:
		i := 0
		for ; n-i > 16; i += 16 {
			seed = wymix(le64(key[i:])^wyp1, le64(key[i+8:])^seed)
		}
		a, b = le64(key[n-16:]), le64(key[n-8:])
	}
	hi, lo := bits.Mul64(a^wyp1, b^seed)
	return wymix(lo^wyp0^uint64(n), hi^wyp1)
}

func le32[T string | []byte](p T) uint32 {
	_ = p[3]
	return uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
}

func le64[T string | []byte](p T) uint64 {
	if b, ok := any(p).([]byte); ok {
		return binary.LittleEndian.Uint64(b)
	}
	_ = p[7]
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
}

// newShardSeed returns a random seed for hashKey.
func newShardSeed() uint64 { return rand.Uint64() }
