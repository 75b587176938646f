//go:build !unix || race

package engine

import "unsafe"

// mapMemory returns nil: the store's chunks and index are Go allocations. So they are with
// the race detector, which checks only memory of the Go heap.
func mapMemory(int, bool) unsafe.Pointer { return nil }

// unmapMemory is never called: mapMemory maps nothing.
func unmapMemory(unsafe.Pointer, int) {}

// releaseMemory is never called: mapMemory maps nothing.
func releaseMemory(unsafe.Pointer, int) {}
