//go:build unix

package persist

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestChecksumFaultIsCorrupt: chunks in a mapping whose file was cut short fault when
// summed, on each of the workers: an error wrapping ErrCorrupt, not a crash.
func TestChecksumFaultIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut")
	const size = 1 << 20
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	chunks := [][]byte{m[:size/2], m[size/2:]} // the first chunk's first page is still there
	for workers := 1; workers <= 2; workers++ {
		if _, err := checksumOn("test", chunks, size, workers); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d workers: %v, want an error wrapping ErrCorrupt", workers, err)
		}
	}
}
