package persist

import (
	"fmt"
	"hash/crc32"
	"runtime"
	"runtime/debug"
	"sync"
)

// parallelSumMin is the size (bytes) from which checksum shares the work out: a 10M-tuple
// file's cells are 324 MB, 45 ms to sum on one thread of this machine, most of the time
// from start to the load's first cell but the delta log's.
const parallelSumMin = 16 << 20

// checksum returns the CRC-32C of the chunks' bytes (of bucket name), in order, as
// crc32.Update over each in turn would, shared out between the threads (GOMAXPROCS) when
// they hold parallelSumMin bytes or more. A fault reading them (a mapping cut short) is an
// error wrapping ErrCorrupt; any other panic is not recovered (a bug is not a damaged file).
func checksum(name string, chunks [][]byte) (uint32, error) {
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	workers := 1
	if total >= parallelSumMin {
		workers = runtime.GOMAXPROCS(0)
	}
	return checksumOn(name, chunks, total, workers)
}

// checksumOn is checksum on workers goroutines (at least one), the chunks, of total bytes,
// in runs of about total/workers bytes each, whose sums are joined in order (crcJoin).
func checksumOn(name string, chunks [][]byte, total, workers int) (uint32, error) {
	workers = max(1, min(workers, len(chunks)))
	type run struct {
		from, to int    // chunks [from, to)
		n        int64  // their bytes
		crc      uint32 // their CRC-32C
		err      error
	}
	runs := make([]run, 0, workers)
	from, n := 0, 0
	for i, c := range chunks {
		n += len(c)
		if n*workers >= total*(len(runs)+1) || i == len(chunks)-1 {
			runs = append(runs, run{from: from, to: i + 1})
			from = i + 1
		}
	}
	var wg sync.WaitGroup
	for i := range runs {
		r := &runs[i]
		wg.Go(func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if p := recover(); p != nil {
					r.err = fmt.Errorf("%w: %s chunks %d to %d: %w", ErrCorrupt, name, r.from, r.to-1, faultError(p))
				}
			}()
			for _, c := range chunks[r.from:r.to] {
				r.crc = crc32.Update(r.crc, castagnoli, c)
				r.n += int64(len(c))
			}
		})
	}
	wg.Wait()
	var crc uint32
	for _, r := range runs {
		if r.err != nil {
			return 0, r.err
		}
		crc = crcJoin(crc, r.crc, r.n)
	}
	return crc, nil
}

// crcJoin returns the CRC-32C of a's bytes followed by b's, from a's and b's CRC-32Cs
// and b's length n: a's, times x to the power of b's bits, plus b's (the register's
// preset and final inversion cancel out: crc(a‖b) = crc(a)·x^8n + crc(b), modulo the
// polynomial).
func crcJoin(a, b uint32, n int64) uint32 {
	return mulMod(a, xPow8n(n)) ^ b
}

// mulMod returns a·b modulo the Castagnoli polynomial, a, b and the product in the
// reflected form of the CRC's register (bit 31 the coefficient of x^0, bit 0 that of
// x^31).
func mulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		b = b>>1 ^ crc32.Castagnoli&-(b&1) // b·x: x^31's coefficient comes back as the polynomial's rest
	}
	return p
}

// xPow8n returns x to the power of 8n modulo the Castagnoli polynomial, reflected (mulMod),
// by squaring.
func xPow8n(n int64) uint32 {
	r, sq := uint32(1)<<31, uint32(1)<<(31-8) // x^0, x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = mulMod(r, sq)
		}
		sq = mulMod(sq, sq)
	}
	return r
}
