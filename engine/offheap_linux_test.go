//go:build linux && !race

package engine

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// resident returns how many of the pages of chunk c are in memory (mincore).
func resident(t *testing.T, c chunkRef) int {
	t.Helper()
	size := unsafe.Sizeof(chunk{})
	vec := make([]byte, (size+4095)/4096)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(c.p)), size, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestTrimChunksGivesBackPages: a chunk a load populates is in memory whole, and once
// trimmed only the pages of its slots in use are; the slots keep their keys and counts,
// and slots added after the trim start from zero.
func TestTrimChunksGivesBackPages(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skip("the counts below are of 4 KiB pages")
	}
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && strings.Contains(string(thp), "[always]") {
		t.Skip("transparent huge pages always: a chunk's pages may come as one huge page")
	}
	seed := newShardSeed()
	hash := func(k string) uint32 { return hashInShard(seed, k) }
	pages := int(unsafe.Sizeof(chunk{}) / 4096)
	for _, populate := range []bool{true, false} {
		t.Run(fmt.Sprint("populate=", populate), func(t *testing.T) {
			var sh shard
			defer func() {
				for _, c := range sh.chunks {
					freeChunk(c)
				}
			}()
			ref := map[string]int64{}
			add := func(from, to int) {
				for n := from; n < to; n++ {
					k := fmt.Sprint("user:", n)
					i := sh.add(hash, hash(k), []byte(k), populate)
					if sh.at(i).ent != (entry{}) {
						t.Fatalf("slot %d of a new key is not zero", i)
					}
					sh.at(i).ent.reset()
					sh.at(i).ent.regional[0] = uint64(n + 1)
					ref[k] = int64(n + 1)
				}
			}
			add(0, 100) // slots 0 to 99: 8000 bytes, the chunk's first two pages
			if !sh.chunks[0].mapped {
				t.Skip("chunks are Go allocations here")
			}
			want := 2
			if populate {
				want = pages
			}
			if got := resident(t, sh.chunks[0]); got != want {
				t.Fatalf("%d pages in memory before the trim, want %d", got, want)
			}
			sh.trimChunks()
			if got := resident(t, sh.chunks[0]); got != 2 {
				t.Fatalf("%d pages in memory after the trim, want 2", got)
			}
			checkShard(t, &sh, hash, ref)
			add(100, chunkSlots+10) // into the given back pages, and a second chunk
			checkShard(t, &sh, hash, ref)
			sh.trimChunks()
			if got := resident(t, sh.chunks[0]); got != pages {
				t.Fatalf("a full chunk: %d pages in memory, want %d", got, pages)
			}
			if got := resident(t, sh.chunks[1]); got != 1 {
				t.Fatalf("the second chunk, 10 slots: %d pages in memory, want 1", got)
			}
			checkShard(t, &sh, hash, ref)
		})
	}
}
