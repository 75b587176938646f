// Package integration runs the real ratchet binary and talks to it the way users do: with
// go-redis, raw sockets, redis-cli and redis-benchmark.
//
// TestMain builds ./cmd/ratchet once into a temporary directory. Each test starts its own
// process (start) on free loopback ports, so tests run in parallel and never share counts.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// binPath is the ratchet binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ratchet-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	binPath = filepath.Join(dir, "ratchet")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/ratchet")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go build ./cmd/ratchet: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// requireTool returns the path of the external program name, which the test needs. When it
// is missing the test is skipped with the command that installs it, so a plain `go test
// ./...` on a machine without it says what to install; with RATCHET_CI=1 (set by .ci/run)
// the test fails instead, so CI never passes by skipping.
func requireTool(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missingTool(t, name+" is not installed", install)
	}
	return path
}

// missingTool skips t (fails it under RATCHET_CI=1) because what it needs is missing.
func missingTool(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("RATCHET_CI") == "1" {
		t.Fatalf("%s (RATCHET_CI=1, so this fails instead of skipping); install it with: %s", what, install)
	}
	t.Skipf("%s; install it with: %s", what, install)
}

// moduleRoot finds the directory of go.mod: `go env GOMOD`, else the parent directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	abs, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return "", fmt.Errorf("cannot find the module root: %w", err)
	}
	return abs, nil
}

// Ports handed out in this test process, so that parallel tests never pick the same one.
var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// freePort returns a loopback port that was free a moment ago: listen on :0, close.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen on a free port: %v", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsUsed[p] {
			portsUsed[p] = true
			return p
		}
	}
	t.Fatal("no free port found in 100 tries")
	return 0
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// proc is one running ratchet process.
type proc struct {
	t           testing.TB
	Addr        string // RESP address
	MetricsAddr string // "" when metrics are disabled
	DataDir     string // "" when snapshots are disabled
	TLS         bool   // the RESP listener speaks TLS (--tls-cert)

	args    []string
	env     []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error
	starts  int
}

// start runs ratchet with args. --listen, --metrics-listen and --data-dir are added (free
// loopback ports, a temporary directory) unless args or env already set them.
func start(t testing.TB, args ...string) *proc { return startEnv(t, nil, args...) }

// startEnv is start with extra environment variables ("RATCHET_LISTEN=...").
func startEnv(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, picked := newProc(t, env, args)
		err := p.launch()
		if err == nil {
			return p
		}
		// Another process may have taken a port we picked between our probe and its bind.
		if picked && attempt < 3 && strings.Contains(p.logTail(), "address already in use") {
			t.Logf("port taken, retrying: %v", err)
			continue
		}
		t.Fatalf("start ratchet %v: %v\n--- log ---\n%s", p.args, err, p.logTail())
	}
}

// newProc prepares a proc; picked reports whether it chose ports itself.
func newProc(t testing.TB, env, args []string) (*proc, bool) {
	p := &proc{t: t, env: env}
	a := append([]string(nil), args...)
	picked := false
	if v, ok := setting(a, env, "listen"); ok {
		p.Addr = v
	} else {
		p.Addr = loopback(freePort(t))
		a = append(a, "--listen", p.Addr)
		picked = true
	}
	if v, ok := setting(a, env, "metrics-listen"); ok {
		p.MetricsAddr = v
	} else {
		p.MetricsAddr = loopback(freePort(t))
		a = append(a, "--metrics-listen", p.MetricsAddr)
		picked = true
	}
	if v, ok := setting(a, env, "data-dir"); ok {
		p.DataDir = v
	} else {
		p.DataDir = t.TempDir()
		a = append(a, "--data-dir", p.DataDir)
	}
	_, p.TLS = setting(a, env, "tls-cert")
	p.args = a
	p.logPath = filepath.Join(t.TempDir(), "ratchet.log")
	t.Cleanup(p.cleanup)
	return p, picked
}

// setting finds --name VALUE / --name=VALUE in args, else RATCHET_NAME in env.
func setting(args, env []string, name string) (string, bool) {
	for i, a := range args {
		for _, f := range []string{"-" + name, "--" + name} {
			if a == f && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v, true
			}
		}
	}
	key := "RATCHET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "="
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, key); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// launch starts the process and waits until it answers PING.
func (p *proc) launch() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	p.mu.Lock()
	p.starts++
	fmt.Fprintf(logf, "=== start %d: ratchet %s\n", p.starts, strings.Join(p.args, " "))
	cmd := exec.Command(binPath, p.args...)
	cmd.Env = append(cleanEnv(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done, p.waitErr = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return p.waitReady(done)
}

// cleanEnv is this process's environment without RATCHET_* variables.
func cleanEnv() []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "RATCHET_") {
			out = append(out, e)
		}
	}
	return out
}

// waitReady polls with PING until any RESP reply comes back (+PONG, or -NOAUTH when a
// password is set), the process exits, or 15 s pass.
func (p *proc) waitReady(done chan struct{}) error {
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		select {
		case <-done:
			return fmt.Errorf("exited before answering PING: %v", p.exitErr())
		default:
		}
		if pingOnce(p.Addr, p.TLS) {
			return nil
		}
		time.Sleep(15 * time.Millisecond)
	}
	p.Kill()
	return errors.New("did not answer PING within 15s")
}

func pingOnce(addr string, overTLS bool) bool {
	var c net.Conn
	var err error
	if overTLS {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 500 * time.Millisecond}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true}) // a test certificate
	} else {
		c, err = net.DialTimeout("tcp", addr, 500*time.Millisecond)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-"))
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// running reports whether the process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// requireRunning fails the test when the process has exited.
func (p *proc) requireRunning(t testing.TB) {
	t.Helper()
	if !p.running() {
		t.Fatalf("ratchet exited: %v\n--- log ---\n%s", p.exitErr(), p.logTail())
	}
}

// Stop sends SIGTERM and waits up to 15 s (then kills). It returns the exit code.
func (p *proc) Stop() int {
	p.t.Helper()
	return p.signal(syscall.SIGTERM, 15*time.Second)
}

// Kill sends SIGKILL and waits. It returns the exit code (-1 for a killed process).
func (p *proc) Kill() int {
	return p.signal(syscall.SIGKILL, 10*time.Second)
}

func (p *proc) signal(sig syscall.Signal, wait time.Duration) int {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return -1
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		p.t.Errorf("ratchet did not exit %v after %v; killing it", wait, sig)
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.t.Errorf("ratchet did not exit after SIGKILL")
			return -1
		}
	}
	return cmd.ProcessState.ExitCode()
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers nothing, like a
// hung or partitioned node. Resume (also run at the end of the test) continues it.
func (p *proc) Pause() {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || !p.running() {
		p.t.Fatal("Pause: the process is not running")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("SIGSTOP: %v", err)
	}
	p.t.Cleanup(p.Resume) // before the process's own cleanup, which needs it running
}

// Resume continues a paused process (SIGCONT); it does nothing to one that has exited.
func (p *proc) Resume() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && p.running() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts the stopped process again with the same arguments, ports and data dir.
func (p *proc) Restart() {
	p.t.Helper()
	if p.running() {
		p.t.Fatal("Restart: the process is still running")
	}
	if err := p.launch(); err != nil {
		p.t.Fatalf("restart ratchet: %v\n--- log ---\n%s", err, p.logTail())
	}
}

func (p *proc) cleanup() {
	if p.running() {
		p.Stop()
	}
	if p.t.Failed() {
		p.t.Logf("--- ratchet log (%s) ---\n%s", p.Addr, p.logTail())
	}
}

// logTail returns the last 8 KiB of the process's output.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// Log returns the whole output of the process so far.
func (p *proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// client returns a go-redis client of the process, closed at the end of the test.
// Protocol 0 means go-redis's default (RESP3).
func (p *proc) client(t testing.TB, opt *redis.Options) *redis.Client {
	t.Helper()
	o := redis.Options{}
	if opt != nil {
		o = *opt
	}
	o.Addr = p.Addr
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 10 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = 30 * time.Second
	}
	o.MaxRetries = -1 // a retried RL.LIMIT could count twice; tests want exact counts
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keepPinging pings addr from its own go-redis client every 20 ms until the returned
// function is called; that function fails t if any PING took longer than pingBound or
// failed, or if none succeeded.
func keepPinging(t testing.TB, addr, password string) (stop func()) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, PoolSize: 1,
		DialTimeout: pingBound, ReadTimeout: pingBound, WriteTimeout: pingBound, MaxRetries: -1})
	quit := make(chan struct{})
	finished := make(chan struct{})
	var (
		ok       int
		failures []string
	)
	go func() {
		defer close(finished)
		// Bounded: at most 60 s of pinging even if stop is never called.
		for i := 0; i < 3000; i++ {
			select {
			case <-quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), pingBound)
			begin := time.Now()
			err := c.Ping(ctx).Err()
			cancel()
			if err != nil {
				failures = append(failures, fmt.Sprintf("PING failed after %v: %v", time.Since(begin), err))
			} else {
				ok++
			}
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() {
		t.Helper()
		once.Do(func() {
			close(quit)
			<-finished
			_ = c.Close()
			for i, f := range failures {
				if i == 5 {
					t.Errorf("... %d more PING failures", len(failures)-5)
					break
				}
				t.Errorf("other client: %s", f)
			}
			if ok == 0 {
				t.Errorf("other client: no PING succeeded")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// pingBound is how long keepPinging's PING may take. The faults it catches (a server that
// spins on a hostile request or blocks on a client that does not read) never answer; a
// loaded 2-core machine under -race answers late, by up to a few seconds.
const pingBound = 10 * time.Second

// infoFields parses the text of INFO into field -> value.
func infoFields(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// infoInt reads one integer field of INFO ratchet through c.
func infoInt(t testing.TB, c *redis.Client, field string) int64 {
	t.Helper()
	text, err := c.Info(context.Background(), "ratchet").Result()
	if err != nil {
		t.Fatalf("INFO ratchet: %v", err)
	}
	v, ok := infoFields(text)[field]
	if !ok {
		t.Fatalf("INFO ratchet has no %s:\n%s", field, text)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO ratchet %s=%q is not an integer", field, v)
	}
	return n
}

// contains reports whether s holds sub, for short failure messages on long texts.
func contains(s []byte, sub string) bool { return bytes.Contains(s, []byte(sub)) }

// refusedStart runs ratchet with args (and env added to a clean environment) and fails t
// unless it exits, non-zero, within 10 s; it returns what the process printed.
func refusedStart(t testing.TB, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ratchet %v did not exit within 10s:\n%s", args, out)
	}
	if err == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("ratchet %v exited 0, want a refusal:\n%s", args, out)
	}
	return string(out)
}
