//go:build linux && !race

package engine

import (
	"syscall"
	"unsafe"
)

// mapPopulate asks mmap for the pages of a mapping at once (an index: every page of it is
// written soon after, and a page first read maps the zero page, which the first write then
// copies, with a TLB flush on every core).
const mapPopulate = syscall.MAP_POPULATE

// releaseMemory gives back the pages of the n bytes at p, within a mapping of mapMemory's
// and on page boundaries: they cost no memory until touched again, and read as zero then
// (Linux's MADV_DONTNEED on a private anonymous mapping; elsewhere it may keep them).
func releaseMemory(p unsafe.Pointer, n int) {
	_ = syscall.Madvise(unsafe.Slice((*byte)(p), n), syscall.MADV_DONTNEED) // only fails for a range not ours
}
