package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
)

// send delivers sig to the running process without waiting for anything.
func (p *proc) send(t testing.TB, sig syscall.Signal) {
	t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || !p.running() {
		t.Fatalf("send %v: the process is not running", sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
}

// waitExit waits (up to timeout) for the process to exit and returns its exit code.
func (p *proc) waitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("ratchet did not exit within %v\n--- log ---\n%s", timeout, p.logTail())
		return -1
	}
}

// TestSIGHUPIgnored: SIGHUP neither stops the server nor loses counts (it used to exit with
// status 129 without a final snapshot); it is logged, and SIGTERM then stops the server
// with its final snapshot as usual.
func TestSIGHUPIgnored(t *testing.T) {
	t.Parallel()
	// No periodic snapshot in this test's lifetime: only the final one can keep counts.
	p := start(t, "--snapshot-interval", "1h")
	c := p.client(t, nil)
	for range 5 {
		limitReply(t, c, "hup", 100, "31d")
	}
	for i := 1; i <= 2; i++ {
		p.send(t, syscall.SIGHUP)
		testwait.Until(t, 15*time.Second, "a log line for each SIGHUP", func() (bool, string) {
			return strings.Count(p.Log(), "SIGHUP ignored") == i, p.logTail()
		})
	}
	p.requireRunning(t)
	if r := limitReply(t, c, "hup", 100, "31d"); r[2] != 94 {
		t.Fatalf("RL.LIMIT after SIGHUP = %v, want remaining 94 (the counts were kept)", r)
	}
	_ = c.Close()
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM %d, want 0\n%s", code, p.logTail())
	}
	p.Restart()
	if n, _ := regional(t, p.client(t, nil), "hup", "31d"); n != 6 {
		t.Errorf("count after restart = %d, want 6", n)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and returns it; it is
// unmounted at the end of the test. Mounting needs root (CAP_SYS_ADMIN): without it the
// test is skipped, or fails under RATCHET_CI=1 (CI runs as root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		what := "cannot mount a tmpfs to fill: " + err.Error()
		if os.Getenv("RATCHET_CI") == "1" {
			t.Fatalf("%s (RATCHET_CI=1, so this fails instead of skipping); run the tests as root", what)
		}
		t.Skipf("%s; run the tests as root (CAP_SYS_ADMIN) to run this test", what)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fillDisk writes path until its file system is full: in 64 KiB writes, then in 4 KiB
// ones (a tmpfs allocates pages), until each fails with ENOSPC.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 4 << 10} {
		chunk := make([]byte, size)
		for i := 0; err == nil; i++ {
			if i == 1<<16 {
				t.Fatalf("filler: %d writes of %d bytes and the file system is not full", i, size)
			}
			_, err = f.Write(chunk)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filler stopped by %v, want ENOSPC", err)
		}
		err = nil
	}
}

// TestFullDiskSIGTERM: SIGTERM while the data dir is full keeps the server serving (it used
// to exit 1 and lose what was counted since the last snapshot), with /readyz "shutting
// down", the previous snapshot intact and no temporary file left; once there is room, the
// snapshot is written and the process exits 0, and a restart has every count, including
// those made after the SIGTERM. A second SIGTERM while the disk is full exits at once,
// non-zero, saying what is lost; the previous snapshot still loads.
func TestFullDiskSIGTERM(t *testing.T) {
	t.Parallel()
	for _, second := range []bool{false, true} {
		name := "room made"
		if second {
			name = "second SIGTERM"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := mountTmpfs(t, "1m")
			p := start(t, "--data-dir", dir, "--snapshot-interval", "100ms")
			c := p.client(t, nil)
			for range 3 {
				limitReply(t, c, "disk:before", 100, "31d")
			}
			// Once this save is done nothing changes, so no save runs while the disk fills
			// (one that finished afterwards would free the old file's room).
			waitSnapshotAfter(t, c, time.Now().UnixMilli())
			saved, err := os.ReadFile(filepath.Join(dir, "snapshot.db"))
			if err != nil {
				t.Fatalf("snapshot before the disk filled: %v", err)
			}
			filler := filepath.Join(dir, "filler")
			fillDisk(t, filler)
			limitReply(t, c, "disk:probe", 100, "31d")
			// Saves are incremental: a frame of a few changed tuples may still fit in the
			// delta log's last page. Enough changed tuples that the next frame does not.
			for i := range 300 {
				limitReply(t, c, fmt.Sprintf("disk:spread:%d", i), 100, "31d")
			}

			p.send(t, syscall.SIGTERM)
			waitReadyz(t, p, http.StatusServiceUnavailable, "shutting down")
			testwait.Until(t, 15*time.Second, "the failed save logged", func() (bool, string) {
				return strings.Contains(p.Log(), "snapshot before shutdown failed"), p.logTail()
			})
			p.requireRunning(t)
			// Still serving and counting: this count must not be lost either.
			if r := limitReply(t, c, "disk:probe", 100, "31d"); r[2] != 98 {
				t.Fatalf("RL.LIMIT after SIGTERM on a full disk = %v, want remaining 98", r)
			}
			if now, err := os.ReadFile(filepath.Join(dir, "snapshot.db")); err != nil || string(now) != string(saved) {
				t.Fatalf("the snapshot changed while the disk was full (%d bytes, %v)", len(now), err)
			}
			testwait.Until(t, 15*time.Second, "no temporary file left by failed saves", func() (bool, string) {
				_, err := os.Stat(filepath.Join(dir, "snapshot.db.tmp"))
				return errors.Is(err, os.ErrNotExist), fmt.Sprint(err)
			})
			p.requireRunning(t)

			if second {
				p.send(t, syscall.SIGTERM)
				if code := p.waitExit(t, 60*time.Second); code == 0 {
					t.Fatalf("exit code after a second SIGTERM on a full disk = 0, want non-zero")
				}
				log := p.Log()
				if !strings.Contains(log, "exiting without a final snapshot") || !strings.Contains(log, "last_saved=") {
					t.Fatalf("no log line of what is lost:\n%s", p.logTail())
				}
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
				p.Restart()
				c = p.client(t, nil)
				if n, _ := regional(t, c, "disk:before", "31d"); n != 3 {
					t.Errorf("count saved before the disk filled = %d after restart, want 3", n)
				}
				return
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if code := p.waitExit(t, 60*time.Second); code != 0 {
				t.Fatalf("exit code once the disk had room = %d, want 0\n%s", code, p.logTail())
			}
			if !strings.Contains(p.Log(), "final snapshot written") {
				t.Errorf("no final snapshot logged:\n%s", p.logTail())
			}
			p.Restart()
			c = p.client(t, nil)
			if n, _ := regional(t, c, "disk:probe", "31d"); n != 2 {
				t.Errorf("probe count after restart = %d, want 2 (one before, one after SIGTERM)", n)
			}
			if n, _ := regional(t, c, "disk:before", "31d"); n != 3 {
				t.Errorf("count after restart = %d, want 3", n)
			}
		})
	}
}

// TestLogsThroughHandler: with --log-format json and --log-level warn, every line the
// process writes is JSON, the failed AUTH's line included (it used the standard logger's
// text format at info).
func TestLogsThroughHandler(t *testing.T) {
	t.Parallel()
	p := start(t, "--log-format", "json", "--log-level", "warn", "--requirepass", "x")
	c := dialRaw(t, p.Addr)
	if got := asError(t, c.do("AUTH", "wrong")); !strings.HasPrefix(got, "WRONGPASS") {
		t.Fatalf("AUTH wrong = %q, want WRONGPASS", got)
	}
	testwait.Until(t, 15*time.Second, "the failed AUTH logged", func() (bool, string) {
		return strings.Contains(strings.ToLower(p.Log()), "authentication failed"), p.logTail()
	})
	if code := p.Stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	lines, auth := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "=== start ") { // the test harness's own line
			continue
		}
		lines++
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		if lvl, _ := rec["level"].(string); lvl == "INFO" || lvl == "DEBUG" {
			t.Errorf("a line below --log-level warn: %q", line)
		}
		if msg, _ := rec["msg"].(string); strings.Contains(strings.ToLower(msg), "authentication failed") {
			auth++
		}
	}
	if auth != 1 {
		t.Errorf("%d JSON lines of the failed AUTH among %d, want 1:\n%s", auth, lines, p.Log())
	}
}

// TestRefusedConfig: values that cannot be meant stop the binary before it listens, with
// exit status 2 and one line naming the flag or variable.
func TestRefusedConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{env: []string{"RATCHET_LISTEN="}, want: "ratchet: RATCHET_LISTEN is empty"},
		{args: []string{"--log-level", "verbose"}, want: `ratchet: --log-level "verbose": want debug, info, warn or error`},
		{args: []string{"--log-format", "yaml"}, want: `ratchet: --log-format "yaml": want text or json`},
		{args: []string{"--region", ""}, want: "ratchet: --region is empty"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// Loopback, in case the value were accepted.
		args := []string{"--data-dir", t.TempDir(), "--metrics-listen", ""}
		if len(tc.env) == 0 {
			args = append(args, "--listen", loopback(freePort(t)))
		}
		cmd := exec.CommandContext(ctx, binPath, append(args, tc.args...)...)
		cmd.Env = append(cleanEnv(), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v %v: %v, want exit status 2\n%s", tc.env, tc.args, err, out)
			continue
		}
		if first, _, _ := strings.Cut(string(out), "\n"); !strings.HasPrefix(first, tc.want) {
			t.Errorf("%v %v: first line %q, want %q", tc.env, tc.args, first, tc.want)
		}
	}
}
