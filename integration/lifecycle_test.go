package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testcert"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/redis/go-redis/v9"
)

// procStatus reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse %s %q: %v", field, rest, err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// pid returns the process id of a running proc.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// hostileConns opens n connections to addr and has each send an unfinished request of
// about 1 MB (two bulks of 500 KB, the second cut short), 16 at a time. It returns the
// connections (closed at the end of the test) and how many the server closed by then.
func hostileConns(t *testing.T, addr string, n int) (conns []net.Conn, closedByServer int) {
	t.Helper()
	chunk := strings.Repeat("x", 500_000)
	req := []byte("*3\r\n$4\r\nECHO\r\n$500000\r\n" + chunk + "\r\n$500000\r\n" + chunk[:450_000])
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Errorf("dial: %v", err)
					continue
				}
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_, werr := c.Write(req)
				mu.Lock()
				conns = append(conns, c)
				if werr != nil {
					closedByServer++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns, closedByServer
}

// TestHostilePartialRequests: connections that each hold an unfinished ~1 MB request
// cannot take the server's memory: past --max-query-buffer the connections holding the
// most are closed, and the peak RSS (VmHWM from /proc) stays within --max-memory + the
// query budget + a per-connection overhead. The figure for 10,000 connections is measured
// with RATCHET_HOSTILE_CONNS=10000 (the default here is smaller, for CI's time).
func TestHostilePartialRequests(t *testing.T) {
	n := 1000
	if v := os.Getenv("RATCHET_HOSTILE_CONNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("RATCHET_HOSTILE_CONNS=%q", v)
		}
	}
	const budgetMiB, maxMemMiB = 64, 64
	maxClients := n + 100
	p := start(t, "--max-query-buffer", fmt.Sprintf("%dMiB", budgetMiB), "--max-memory", fmt.Sprintf("%dMiB", maxMemMiB),
		"--max-clients", strconv.Itoa(maxClients), "--read-timeout", "60s")
	c := p.client(t, nil)
	ctx := context.Background()
	if err := c.Do(ctx, "RL.LIMIT", "k", "10", "1m").Err(); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	baseKiB := procStatus(t, pid, "VmRSS")
	began := time.Now()
	conns, closed := hostileConns(t, p.Addr, n)
	took := time.Since(began)
	// The server is still serving, and counted what it closed.
	if err := c.Do(ctx, "RL.LIMIT", "k", "10", "1m").Err(); err != nil {
		t.Fatalf("RL.LIMIT during the attack: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // let the last evictions land
	peakKiB, nowKiB := procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS")
	evicted := metricValue(t, p, `ratchet_connections_closed_total{reason="query_buffer"}`)
	// The documented bound (README, Memory): --max-memory + --max-query-buffer + 20 KiB
	// per connection slot (--max-clients) + 64 MiB for the runtime; the server sets it as
	// Go's soft memory limit.
	bound := int64(maxMemMiB+budgetMiB+64)<<10 + int64(maxClients)*20
	t.Logf("%d hostile connections (%d refused while sending) in %v: RSS before %d MiB, peak %d MiB, after %d MiB; bound %d MiB; %v closed for the query budget",
		len(conns), closed, took.Round(time.Millisecond), baseKiB>>10, peakKiB>>10, nowKiB>>10, bound>>10, evicted)
	if peakKiB > bound {
		t.Fatalf("peak RSS %d MiB past the bound %d MiB", peakKiB>>10, bound>>10)
	}
	if n*1_000_000 > 2*budgetMiB<<20 && evicted == 0 {
		t.Fatalf("no connection closed for the query budget")
	}
}

// metricValue reads one sample of the metrics endpoint; -1 when it is absent.
func metricValue(t testing.TB, p *proc, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, p), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", sample, rest)
			}
			return v
		}
	}
	return -1
}

// TestStalledTLSHandshakes: clients that connect over TLS and never finish the handshake
// hold --max-clients slots only for --tls-handshake-timeout; then a real client (go-redis
// over TLS) gets in.
func TestStalledTLSHandshakes(t *testing.T) {
	cert, key := writeCert(t)
	const stalled = 100
	handshake := 1 * time.Second
	if v := os.Getenv("RATCHET_HANDSHAKE_TIMEOUT"); v != "" { // 5s, the default, for the README's figure
		var err error
		if handshake, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	p := start(t, "--tls-cert", cert, "--tls-key", key, "--max-clients", strconv.Itoa(stalled),
		"--tls-handshake-timeout", handshake.String())
	var raw []net.Conn
	for range stalled + 50 { // the last 50 are over --max-clients and stall their refusal
		c, err := net.DialTimeout("tcp", p.Addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, c)
	}
	defer func() {
		for _, c := range raw {
			c.Close()
		}
	}()
	began := time.Now()
	// A real client: refused while the slots are held, in once they are freed.
	var in time.Duration
	for time.Since(began) < handshake+10*time.Second {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, TLSConfig: &tls.Config{InsecureSkipVerify: true},
			DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1, Protocol: 2})
		err := c.Ping(context.Background()).Err()
		c.Close()
		if err == nil {
			in = time.Since(began)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if in == 0 {
		t.Fatalf("no client got in within %v of %d stalled handshakes", handshake+10*time.Second, stalled)
	}
	t.Logf("%d stalled TLS handshakes held every slot; a real client got in after %v (--tls-handshake-timeout %v)",
		stalled, in.Round(time.Millisecond), handshake)
	if in < handshake/2 {
		t.Fatalf("got in after %v: the stalled handshakes did not hold the slots", in)
	}
	// The client got in once the first slot was freed; the other stalled handshakes end
	// within moments, each counted.
	testwait.Until(t, 5*time.Second, "every stalled handshake counted", func() (bool, string) {
		v := metricValue(t, p, `ratchet_connections_closed_total{reason="handshake_timeout"}`)
		return v >= stalled, fmt.Sprint(v)
	})
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 and its key as PEM files.
func writeCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	certPEM, keyPEM, err := testcert.New()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// TestConnectionTimeouts: through the binary's flags, an unfinished request is closed
// after --read-timeout and an idle client after --timeout (seconds, as Redis), each
// counted by reason; a client that keeps talking stays.
func TestConnectionTimeouts(t *testing.T) {
	p := start(t, "--read-timeout", "300ms", "--timeout", "1")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", p.Addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	partial, pr := dial()
	idle, ir := dial()
	busy, br := dial()
	_, _ = io.WriteString(partial, "*3\r\n$8\r\nRL.LIMIT\r\n$1\r\nk")
	for range 8 { // 8 × 200 ms: past --timeout, but never idle that long
		_, _ = io.WriteString(busy, "PING\r\n")
		if line, _ := br.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("busy client: %q", line)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for name, r := range map[string]*bufio.Reader{"partial": pr, "idle": ir} {
		if _, err := r.ReadByte(); err == nil || !(err == io.EOF || strings.Contains(err.Error(), "reset")) {
			t.Errorf("%s connection not closed: %v", name, err)
		}
	}
	_ = idle
	if v := metricValue(t, p, `ratchet_connections_closed_total{reason="read_timeout"}`); v != 1 {
		t.Errorf("read timeouts counted: %v", v)
	}
	if v := metricValue(t, p, `ratchet_connections_closed_total{reason="idle_timeout"}`); v != 1 {
		t.Errorf("idle timeouts counted: %v", v)
	}
}
