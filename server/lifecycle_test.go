package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testcert"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/server"
)

// waitStat polls the server's counters until cond holds, at most 10 s.
func waitStat(t *testing.T, srv *server.Server, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, func() (bool, string) {
		return cond(), fmt.Sprintf("stats %+v", srv.ConnStats())
	})
}

// pauses measures the longest pause between a test client's steps (its reads or writes),
// from the first step on.
type pauses struct {
	last    time.Time
	longest time.Duration
}

func (p *pauses) step() {
	now := time.Now()
	if !p.last.IsZero() {
		p.longest = max(p.longest, now.Sub(p.last))
	}
	p.last = now
}

// steadyClient runs attempt, a client that must not be dropped by a server with timeout,
// since it makes progress (steps) more often: first with timeout first, then three and nine
// times as long. A client that pauses longer than the timeout is rightly dropped, and on a
// loaded machine (-race, shared cores) a test's client can be descheduled that long however
// short its sleeps. So an attempt that fails is a failure of the server only when the
// client's longest pause stayed under half the timeout (the server looks for progress
// every quarter of it); otherwise it proves nothing, and the next attempt, with a longer
// timeout and pace, runs.
func steadyClient(t *testing.T, first time.Duration, attempt func(timeout time.Duration, p *pauses) error) {
	t.Helper()
	for timeout := first; timeout <= 9*first; timeout *= 3 {
		var p pauses
		err := attempt(timeout, &p)
		if err == nil {
			return
		}
		if p.longest < timeout/2 {
			t.Fatalf("timeout %v: dropped although the client never paused longer than %v: %v", timeout, p.longest, err)
		}
		t.Logf("timeout %v: the client paused %v (a loaded machine), so this proves nothing: %v", timeout, p.longest, err)
	}
	t.Skipf("the client paused longer than half the timeout at every timeout up to %v: the machine is too loaded to tell", 9*first)
}

// expectClosed reads from c until EOF or a reset, at most 10 s, and fails otherwise.
func expectClosed(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, r); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

// TestReadTimeout: an incomplete request that makes no progress is closed after
// ReadTimeout and counted; a connection that sends nothing at all is not (no --timeout).
func TestReadTimeout(t *testing.T) { eachMode(t, testReadTimeout) }

func testReadTimeout(t *testing.T, loop bool) {
	srv, addr := start(t, server.Config{EventLoops: loops(loop), ReadTimeout: 100 * time.Millisecond})
	idle, idleR := dial(t, addr)
	c, r := dial(t, addr)
	began := time.Now()
	_, _ = io.WriteString(c, "PING\r\n*2\r\n$4\r\nECHO\r\n$10\r\nabc")
	if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("got %q", line)
	}
	expectClosed(t, c, r)
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Fatalf("closed after %v, before ReadTimeout", took)
	}
	if s := srv.ConnStats(); s.ReadTimeouts != 1 || s.IdleTimeouts != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The idle connection outlived several ReadTimeouts and still works.
	_, _ = io.WriteString(idle, "PING\r\n")
	if line, _ := idleR.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("idle connection: %q", line)
	}
}

// TestReadTimeoutProgress: a request that keeps arriving, slowly, is not cut off.
func TestReadTimeoutProgress(t *testing.T) { eachMode(t, testReadTimeoutProgress) }

func testReadTimeoutProgress(t *testing.T, loop bool) {
	steadyClient(t, 300*time.Millisecond, func(rt time.Duration, p *pauses) error {
		srv, addr := start(t, server.Config{EventLoops: loops(loop), ReadTimeout: rt})
		c, r := dial(t, addr)
		req := "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n"
		for i := range req { // a byte every ReadTimeout/7.5: the request takes four ReadTimeouts
			_, _ = io.WriteString(c, req[i:i+1])
			p.step()
			time.Sleep(rt * 2 / 15)
		}
		if line, err := r.ReadString('\n'); line != "$5\r\n" {
			return fmt.Errorf("got %q (%v); stats %+v", line, err, srv.ConnStats())
		}
		return nil
	})
}

// TestIdleTimeout: Redis's timeout closes a connection with no request for that long.
func TestIdleTimeout(t *testing.T) { eachMode(t, testIdleTimeout) }

func testIdleTimeout(t *testing.T, loop bool) {
	var srv *server.Server
	var c net.Conn
	var r *bufio.Reader
	steadyClient(t, 150*time.Millisecond, func(it time.Duration, p *pauses) error {
		var addr string
		srv, addr = start(t, server.Config{EventLoops: loops(loop), IdleTimeout: it})
		c, r = dial(t, addr)
		p.step()      // the idle time counts from the connection
		for range 4 { // active connections stay: requests every IdleTimeout/3 over 4 of them
			_, _ = io.WriteString(c, "PING\r\n")
			if line, err := r.ReadString('\n'); line != "+PONG\r\n" {
				return fmt.Errorf("got %q (%v); stats %+v", line, err, srv.ConnStats())
			}
			p.step()
			time.Sleep(it / 3)
		}
		return nil
	})
	expectClosed(t, c, r)
	if s := srv.ConnStats(); s.IdleTimeouts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestQueryBudget: past MaxQueryBuffer, the connection holding the most request bytes is
// closed; the others, and complete requests, are served.
func TestQueryBudget(t *testing.T) { eachMode(t, testQueryBudget) }

func testQueryBudget(t *testing.T, loop bool) {
	const budget = 1280 << 10 // each connection's first 16 KiB are outside it
	srv, addr := start(t, server.Config{EventLoops: loops(loop), MaxQueryBuffer: budget})
	// big holds 900 KB of an unfinished request (a 1 MiB buffer).
	big, bigR := dial(t, addr)
	x := strings.Repeat("x", 500_000)
	_, _ = io.WriteString(big, "*3\r\n$4\r\nECHO\r\n$500000\r\n"+x+"\r\n$500000\r\n"+x[:400_000])
	waitStat(t, srv, "the big request buffered", func() bool { return srv.ConnStats().QueryBufferBytes >= 900_000 })
	// small holds 100 KB, then 200 KB (fits), then 300 KB (does not): big is closed.
	small, smallR := dial(t, addr)
	_, _ = io.WriteString(small, "*2\r\n$4\r\nECHO\r\n$400000\r\n")
	for range 3 {
		_, _ = io.WriteString(small, strings.Repeat("y", 100_000))
		time.Sleep(20 * time.Millisecond)
	}
	expectClosed(t, big, bigR)
	if s := srv.ConnStats(); s.QueryEvictions != 1 || s.QueryBufferBytes > budget {
		t.Fatalf("stats %+v", s)
	}
	_, _ = io.WriteString(small, strings.Repeat("y", 100_000)+"\r\n")
	if line, _ := smallR.ReadString('\n'); line != "$400000\r\n" {
		t.Fatalf("small request: %q; stats %+v", line, srv.ConnStats())
	}
	waitStat(t, srv, "the budget empty again", func() bool { return srv.ConnStats().QueryBufferBytes == 0 })
}

// TestWriteTimeoutFromProgress: a client that reads a large reply slowly but steadily is
// not dropped, although the whole reply takes longer than WriteTimeout.
func TestWriteTimeoutFromProgress(t *testing.T) { eachMode(t, testWriteTimeoutFromProgress) }

func testWriteTimeoutFromProgress(t *testing.T, loop bool) {
	steadyClient(t, 100*time.Millisecond, func(wt time.Duration, p *pauses) error {
		srv, addr := start(t, server.Config{EventLoops: loops(loop), WriteTimeout: wt})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// 200 replies of 100 KB, 20 MB, twice what the sockets' buffers hold; read 64 KiB
		// every WriteTimeout/20, 15 WriteTimeouts at least, so the server's writes wait many
		// WriteTimeouts in all. (A small SO_RCVBUF would be quicker, but on loopback TCP then
		// stalls by itself.)
		const n = 200
		payload := strings.Repeat("p", 100_000)
		go func() { _, _ = io.WriteString(c, strings.Repeat("*2\r\n$4\r\nECHO\r\n$100000\r\n"+payload+"\r\n", n)) }()
		want := n * len("$100000\r\n"+payload+"\r\n")
		buf := make([]byte, 64<<10)
		got := 0
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for got < want {
			m, err := c.Read(buf)
			p.step()
			got += m
			if err != nil {
				return fmt.Errorf("after %d of %d bytes: %w; stats %+v", got, want, err, srv.ConnStats())
			}
			time.Sleep(wt / 20)
		}
		if s := srv.ConnStats(); s.WriteTimeouts != 0 {
			t.Fatalf("stats %+v", s)
		}
		return nil
	})
}

// TestHandshakeTimeout: a TLS client that never finishes its handshake loses its slot
// after HandshakeTimeout, so a real client gets in.
func TestHandshakeTimeout(t *testing.T) {
	srv, addr := start(t, server.Config{TLS: selfSigned(t), MaxClients: 3, HandshakeTimeout: 200 * time.Millisecond})
	for range 3 { // TCP connected, no ClientHello
		dial(t, addr)
	}
	// Each holds a slot until its handshake times out (it may have on a loaded machine).
	waitStat(t, srv, "three slots taken", func() bool {
		s := srv.ConnStats()
		return s.Connected+int(s.HandshakeTimeouts) == 3 && s.Rejected == 0
	})
	began := time.Now()
	// The count goes up as a connection is closed, before its slot is freed: a client let
	// in before then would be refused (max number of clients reached), so wait for both.
	waitStat(t, srv, "stalled handshakes closed and their slots freed", func() bool {
		s := srv.ConnStats()
		return s.HandshakeTimeouts == 3 && s.Connected == 0
	})
	// A real client's handshake may itself take longer than 200 ms on a loaded machine: the
	// server then closes it as it did the stalled ones, and the client tries again. Any other
	// failure (a refusal) fails the test.
	for {
		timeouts := srv.ConnStats().HandshakeTimeouts
		line, err := tlsPing(addr)
		if line == "+PONG\r\n" {
			return
		}
		s := srv.ConnStats()
		if s.HandshakeTimeouts == timeouts || time.Since(began) > time.Minute {
			t.Fatalf("got %q (%v); stats %+v", line, err, s)
		}
		t.Logf("the client's handshake timed out too (%v); again", err)
	}
}

// tlsPing sends PING over a new TLS connection and returns the reply's first line.
func tlsPing(addr string) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// selfSigned returns a server TLS configuration with a fresh self-signed certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := testcert.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
