//go:build !amd64

package prefetch

import "unsafe"

// Enabled reports whether Line prefetches (else a caller may skip computing addresses).
const Enabled = false

// Line asks for the cache line that holds p; a no-op where no prefetch instruction is used.
func Line(p unsafe.Pointer) {}
