//go:build unix && !race

package engine

import (
	"syscall"
	"unsafe"
)

// mapMemory returns n bytes of zeroed memory outside the Go heap (an anonymous private
// mapping), or nil when the system has none to give. Its pages cost memory once touched,
// or at once when populate is set (where the system can: mapPopulate).
func mapMemory(n int, populate bool) unsafe.Pointer {
	flags := syscall.MAP_ANON | syscall.MAP_PRIVATE
	if populate {
		flags |= mapPopulate
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, flags)
	if err != nil || len(b) != n {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// unmapMemory gives back the n bytes at p that mapMemory returned.
func unmapMemory(p unsafe.Pointer, n int) {
	_ = syscall.Munmap(unsafe.Slice((*byte)(p), n)) // only fails for a mapping not ours
}
