package prefetch

import "unsafe"

// Line asks for the cache line that holds p (PREFETCHT0).
//
//go:noescape
func Line(p unsafe.Pointer)
