package prefetch

import "unsafe"

// Enabled reports whether Line prefetches (else a caller may skip computing addresses).
const Enabled = true

// Line asks for the cache line that holds p (PREFETCHT0).
//
//go:noescape
func Line(p unsafe.Pointer)
