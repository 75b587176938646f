//go:build unix

package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes the exclusive lock of dir: a flock on dir/LOCK, which holds the pid of the
// process that has it. The lock lasts until the returned file is closed or the process
// ends (also by kill -9: the kernel drops it). A dir locked elsewhere is ErrLocked.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "unknown"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = strings.TrimSpace(string(b[:min(len(b), 32)]))
		}
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by another ratchet process (pid %s); "+
				"give each process its own --data-dir", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	if _, err := f.WriteAt(pid, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	return f, nil
}
