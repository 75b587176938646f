//go:build unix

package persist

import (
	"os"
	"syscall"
)

// mapLog maps the size bytes of the log f read-only: a restart reads its logs from the
// page cache's pages rather than from a copy (fresh memory, whose pages the kernel zeroes:
// half of the time a restart took before it served, with 285 MB of logs). A log is never
// written once a process has started from it (the process appends to a log of its own),
// and a fault reading it is an error, not a crash (checkFrame, Opened.Parts).
func mapLog(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmapLog unmaps what mapLog mapped.
func unmapLog(b []byte) error { return syscall.Munmap(b) }
