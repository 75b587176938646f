//go:build unix && !linux && !race

package engine

import "unsafe"

// mapPopulate is 0: a mapping's pages come as they are touched.
const mapPopulate = 0

// releaseMemory does nothing: a mapping's pages are never populated here (mapPopulate),
// so a load leaves none untouched to give back, and MADV_DONTNEED need not zero them.
func releaseMemory(unsafe.Pointer, int) {}
