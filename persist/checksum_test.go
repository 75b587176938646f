package persist

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCJoin: the CRC-32C of two byte strings joined is crcJoin of theirs, for lengths
// around the powers xPow8n squares through, empty ones included.
func TestCRCJoin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lens := []int{0, 1, 2, 3, 4, 7, 8, 63, 64, 65, 1000, 4096, 65537}
	for _, la := range lens {
		for _, lb := range lens {
			a, b := make([]byte, la), make([]byte, lb)
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			want := crc32.Checksum(append(append([]byte{}, a...), b...), castagnoli)
			if got := crcJoin(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(lb)); got != want {
				t.Fatalf("%d then %d bytes: joined %08x, want %08x", la, lb, got, want)
			}
		}
	}
}

// TestChecksumOn: the sum of chunks shared out between 1 to 9 workers is crc32.Update's
// over them in turn, whatever their sizes (one large chunk among small ones, more
// workers than chunks, none at all).
func TestChecksumOn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sizes := range [][]int{{}, {5}, {1, 1, 1}, {1 << 16, 3, 1 << 16, 70000, 12}, {1, 1 << 20, 1}, {100, 200, 300, 400, 500, 600, 700}} {
		var chunks [][]byte
		var want uint32
		total := 0
		for _, n := range sizes {
			c := make([]byte, n)
			for i := range c {
				c[i] = byte(rng.Uint32())
			}
			chunks = append(chunks, c)
			want = crc32.Update(want, castagnoli, c)
			total += n
		}
		for workers := 1; workers <= 9; workers++ {
			t.Run(fmt.Sprint(sizes, workers), func(t *testing.T) {
				got, err := checksumOn("test", chunks, total, workers)
				if err != nil || got != want {
					t.Fatalf("checksum %08x, %v; want %08x", got, err, want)
				}
			})
		}
	}
}
