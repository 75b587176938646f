//go:build unix && !race

package engine

import (
	"syscall"
	"unsafe"
)

// mapMemory returns n bytes of zeroed memory outside the Go heap (an anonymous private
// mapping), or nil when the system has none to give. Its pages cost memory once touched.
func mapMemory(n int) unsafe.Pointer {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil || len(b) != n {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// unmapMemory gives back the n bytes at p that mapMemory returned.
func unmapMemory(p unsafe.Pointer, n int) {
	_ = syscall.Munmap(unsafe.Slice((*byte)(p), n)) // only fails for a mapping not ours
}
