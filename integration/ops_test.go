package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCorruptSnapshotSetAside: a snapshot that does not load is moved aside unchanged
// before anything overwrites it, the log says where, and the server serves from empty;
// its own snapshots then load on the next start and the moved file stays.
func TestCorruptSnapshotSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("this is not a bbolt file\n"), 4096)
	if err := os.WriteFile(filepath.Join(dir, "snapshot.db"), garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "--data-dir", dir, "--snapshot-interval", "50ms")
	moved, err := filepath.Glob(filepath.Join(dir, "snapshot.db.corrupt-*"))
	if err != nil || len(moved) != 1 {
		t.Fatalf("files moved aside: %v, %v; want one", moved, err)
	}
	if b, err := os.ReadFile(moved[0]); err != nil || !bytes.Equal(b, garbage) {
		t.Fatalf("the moved file is not the damaged snapshot: %d bytes, %v", len(b), err)
	}
	log := p.Log()
	for _, want := range []string{"moved aside", moved[0], filepath.Join(dir, "snapshot.db")} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, p.logTail())
		}
	}
	c := p.client(t, nil)
	for range 3 {
		limitReply(t, c, "aside", 10, "31d")
	}
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	p.Restart()
	c = p.client(t, nil)
	if n, _ := regional(t, c, "aside", "31d"); n != 3 {
		t.Errorf("count after restart = %d, want 3", n)
	}
	if b, err := os.ReadFile(moved[0]); err != nil || !bytes.Equal(b, garbage) {
		t.Errorf("the moved file changed after saves and a restart: %d bytes, %v", len(b), err)
	}
	if strings.Count(p.Log(), "moved aside") != 1 {
		t.Errorf("the good snapshot was moved aside too:\n%s", p.logTail())
	}
}

// TestDataDirLock: a second process on the same data directory refuses to start, naming
// the directory and the pid of the first; the first keeps serving.
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	first := start(t)
	first.mu.Lock()
	pid := first.cmd.Process.Pid
	first.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "--listen", loopback(freePort(t)), "--metrics-listen", "",
		"--data-dir", first.DataDir)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("second process on %s: %v, want a non-zero exit\n%s", first.DataDir, err, out)
	}
	for _, want := range []string{first.DataDir, "pid " + strconv.Itoa(pid), "another ratchet process"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("second process's message lacks %q:\n%s", want, out)
		}
	}
	first.requireRunning(t)
	limitReply(t, first.client(t, nil), "lock", 10, "1m")
}
