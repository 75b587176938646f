package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
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

// readyz returns the status and body of GET /readyz of p.
func readyz(t testing.TB, p *proc) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + p.MetricsAddr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// waitReadyz polls /readyz of p until it answers code with a body containing want.
func waitReadyz(t testing.TB, p *proc, code int, want string) {
	t.Helper()
	testwait.Until(t, 15*time.Second, fmt.Sprintf("/readyz %d %q", code, want), func() (bool, string) {
		c, body := readyz(t, p)
		return c == code && strings.Contains(body, want), fmt.Sprintf("%d %q", c, body)
	})
}

// TestReadyzEdge: an edge whose origin is stopped is not ready (503, naming the origin),
// while /healthz stays 200; once the origin is back it is ready. An edge whose origin
// refuses its cluster secret is not ready either.
func TestReadyzEdge(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	if code := origin.Stop(); code != 0 {
		t.Fatalf("origin exit code %d", code)
	}
	edge := startEdge(t, []*proc{origin})
	waitReadyz(t, edge, http.StatusServiceUnavailable, origin.Addr+" unreachable")
	hc := &http.Client{Timeout: 5 * time.Second}
	if resp, err := hc.Get("http://" + edge.MetricsAddr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz while not ready: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	origin.Restart()
	waitReadyz(t, edge, http.StatusOK, "ok")

	wrong := startEdge(t, []*proc{origin}, "--cluster-secret", "not-the-secret")
	waitReadyz(t, wrong, http.StatusServiceUnavailable, "refuses the cluster secret")
}

// TestReadyzSnapshots: an origin whose snapshots fail for more than 3 intervals in a row is
// not ready; the next successful snapshot makes it ready again.
func TestReadyzSnapshots(t *testing.T) {
	t.Parallel()
	p := start(t, "--snapshot-interval", "50ms")
	waitReadyz(t, p, http.StatusOK, "ok")
	// A non-empty directory where the temporary file goes makes every save fail.
	block := filepath.Join(p.DataDir, "snapshot.db.tmp", "x")
	if err := os.MkdirAll(block, 0o755); err != nil {
		t.Fatal(err)
	}
	limitReply(t, p.client(t, nil), "ready", 10, "1m")
	waitReadyz(t, p, http.StatusServiceUnavailable, "snapshots failed")
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, p, http.StatusOK, "ok")
}

// TestEdgeExitLogsUndelivered: an edge stopped while its origin is down says how much
// accepted cost it could not deliver, in units and cells.
func TestEdgeExitLogsUndelivered(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	if code := origin.Stop(); code != 0 {
		t.Fatalf("origin exit code %d", code)
	}
	edge := startEdge(t, []*proc{origin})
	c := edge.client(t, nil)
	for range 4 {
		if r := limitReply(t, c, "undelivered:a", 100, "1h", "COST", 2); r[0] != 1 {
			t.Fatalf("RL.LIMIT while the origin is down = %v, want allowed", r)
		}
	}
	if r := limitReply(t, c, "undelivered:b", 100, "1h", "COST", 3); r[0] != 1 {
		t.Fatalf("RL.LIMIT while the origin is down = %v, want allowed", r)
	}
	_ = c.Close()
	if code := edge.Stop(); code != 0 {
		t.Fatalf("edge exit code %d", code)
	}
	log := edge.Log()
	if !strings.Contains(log, "not delivered") || !strings.Contains(log, "units=11") || !strings.Contains(log, "cells=2") {
		t.Fatalf("exit log does not give the undelivered units and cells:\n%s", edge.logTail())
	}
}
