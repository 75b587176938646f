package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

func start(t *testing.T, cfg server.Config) (*server.Server, string) {
	t.Helper()
	return startWith(t, cfg, func(srv *server.Server) server.Handler {
		eng := engine.New(engine.SystemClock{}, engine.Config{})
		return commands.New(commands.Options{Origin: eng, Host: srv, Role: "origin", Version: "test"})
	})
}

// startWith starts a server on 127.0.0.1 with the handler handler(srv) makes, and stops it
// at the end of the test.
func startWith(t testing.TB, cfg server.Config, handler func(*server.Server) server.Handler) (*server.Server, string) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if cfg.MaxClients == 0 {
		cfg.MaxClients = 100
	}
	srv := server.New(cfg)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	h := handler(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(h) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, srv.Addr().String()
}

// eachMode runs a test against both connection models: a goroutine per connection and
// the event loops.
func eachMode(t *testing.T, test func(t *testing.T, loop bool)) {
	t.Run("goroutines", func(t *testing.T) { test(t, false) })
	t.Run("eventloop", func(t *testing.T) { test(t, true) })
}

// loops is the EventLoops setting of a test mode: two loops, so that connections are
// spread over more than one.
func loops(on bool) int {
	if on {
		return 2
	}
	return 0
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// TestPipelineInOrder sends many requests in one write and expects every reply in order.
func TestPipelineInOrder(t *testing.T) { eachMode(t, testPipelineInOrder) }

func testPipelineInOrder(t *testing.T, loop bool) {
	_, addr := start(t, server.Config{EventLoops: loops(loop)})
	c, r := dial(t, addr)
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n", len(fmt.Sprint(i)), i)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != fmt.Sprintf("%d\r\n", i) {
			t.Fatalf("reply %d = %q, %v", i, line, err)
		}
	}
}

// TestConcurrentClientsExact: many connections race on one key; exactly the limit passes.
func TestConcurrentClientsExact(t *testing.T) { eachMode(t, testConcurrentClientsExact) }

func testConcurrentClientsExact(t *testing.T, loop bool) {
	_, addr := start(t, server.Config{EventLoops: loops(loop)})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(c)
			cmd := strings.Repeat("RL.LIMIT hot 100 10m\r\n", 32)
			if _, err := io.WriteString(c, cmd); err != nil {
				t.Error(err)
				return
			}
			for range 32 {
				head, _ := r.ReadString('\n')
				first, err := r.ReadString('\n')
				for range 4 {
					_, _ = r.ReadString('\n')
				}
				if err != nil || head != "*5\r\n" {
					t.Errorf("reply %q %q %v", head, first, err)
					return
				}
				if first == ":1\r\n" {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 100 {
		t.Fatalf("allowed %d of 640, want exactly 100", allowed)
	}
}

// TestProtocolErrorCloses: a hostile header gets a protocol error and EOF; the server keeps
// serving other connections.
func TestProtocolErrorCloses(t *testing.T) { eachMode(t, testProtocolErrorCloses) }

func testProtocolErrorCloses(t *testing.T, loop bool) {
	_, addr := start(t, server.Config{EventLoops: loops(loop)})
	for _, in := range []string{"*1\r\n$9223372036854775800\r\n", "*999999999\r\n", "*1\r\n+x\r\n"} {
		c, r := dial(t, addr)
		_, _ = io.WriteString(c, "PING\r\n"+in)
		if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("reply before the error = %q", line)
		}
		line, _ := r.ReadString('\n')
		if !strings.HasPrefix(line, "-ERR Protocol error: ") {
			t.Fatalf("%q: got %q", in, line)
		}
		if _, err := r.ReadByte(); err != io.EOF {
			t.Fatalf("%q: connection not closed: %v", in, err)
		}
	}
	c, r := dial(t, addr)
	_, _ = io.WriteString(c, "PING\r\n")
	if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("server not answering after errors: %q", line)
	}
}

// TestBufferLimit: an incomplete request larger than MaxBuffer is refused, not buffered.
func TestBufferLimit(t *testing.T) { eachMode(t, testBufferLimit) }

func testBufferLimit(t *testing.T, loop bool) {
	lim := resp.DefaultLimits()
	lim.MaxBuffer = 64 << 10
	_, addr := start(t, server.Config{EventLoops: loops(loop), Limits: lim})
	c, r := dial(t, addr)
	go func() {
		// Three legal 30 KiB bulks, never completed: 90 KiB pending.
		_, _ = io.WriteString(c, "*4\r\n$4\r\nECHO\r\n")
		for range 3 {
			_, _ = io.WriteString(c, "$30000\r\n"+strings.Repeat("x", 30000)+"\r\n")
		}
	}()
	line, _ := r.ReadString('\n')
	if !strings.HasPrefix(line, "-ERR Protocol error: request exceeds") {
		t.Fatalf("got %q", line)
	}
}

func TestMaxClients(t *testing.T) { eachMode(t, testMaxClients) }

func testMaxClients(t *testing.T, loop bool) {
	srv, addr := start(t, server.Config{EventLoops: loops(loop), MaxClients: 2})
	for range 2 {
		c, r := dial(t, addr)
		_, _ = io.WriteString(c, "PING\r\n")
		if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("got %q", line)
		}
	}
	_, r := dial(t, addr)
	if line, _ := r.ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client got %q", line)
	}
	if s := srv.ConnStats(); s.Rejected != 1 || s.Connected != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestWriteTimeout: a client that never reads is dropped; others are served meanwhile.
func TestWriteTimeout(t *testing.T) { eachMode(t, testWriteTimeout) }

func testWriteTimeout(t *testing.T, loop bool) {
	_, addr := start(t, server.Config{EventLoops: loops(loop), WriteTimeout: 200 * time.Millisecond})
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if tc, ok := slow.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	gone := make(chan error, 1)
	go func() {
		req := []byte(strings.Repeat("*1\r\n$7\r\nCOMMAND\r\n", 1000))
		for range 1000 {
			_ = slow.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := slow.Write(req); err != nil {
				gone <- err
				return
			}
		}
		gone <- nil
	}()
	c, r := dial(t, addr)
	_, _ = io.WriteString(c, "PING\r\n")
	if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("got %q", line)
	}
	select {
	case err := <-gone:
		if err == nil {
			t.Fatal("the server kept accepting requests from a client that never reads")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("non-reading client was never dropped")
	}
}

// waitingLimiter is an edge-like Limiter: keys starting with "cold:" cannot be decided
// without waiting (TryLimit says so), and Limit waits a little before deciding.
type waitingLimiter struct {
	*engine.Engine
	waits atomic.Int64
	tries atomic.Int64 // TryLimit calls on cold keys
}

func (l *waitingLimiter) TryLimit(t engine.Tuple, limit, cost uint64, _ int64) (engine.Decision, bool, error) {
	if strings.HasPrefix(string(t.Key), "cold:") {
		l.tries.Add(1)
		return engine.Decision{}, false, nil
	}
	d, err := l.Engine.Limit(t, limit, cost)
	return d, true, err
}

func (l *waitingLimiter) Limit(_ context.Context, t engine.Tuple, limit, cost uint64) (engine.Decision, error) {
	if strings.HasPrefix(string(t.Key), "cold:") {
		l.waits.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	return l.Engine.Limit(t, limit, cost)
}

func (l *waitingLimiter) Status(_ context.Context, t engine.Tuple) engine.Status {
	return l.Engine.Status(t)
}

// TestHandOverKeepsOrder: on an event loop, a request that must wait is served, with the
// rest of its batch, from a goroutine; the replies of a pipeline stay in order, each
// request is counted once, the protocol chosen by HELLO carries over, and the connection
// goes on working.
func TestHandOverKeepsOrder(t *testing.T) {
	lim := &waitingLimiter{Engine: engine.New(engine.SystemClock{}, engine.Config{})}
	srv, addr := startWith(t, server.Config{EventLoops: 1}, func(srv *server.Server) server.Handler {
		return commands.New(commands.Options{Limiter: lim, Host: srv, Role: "edge", Version: "test"})
	})
	c, r := dial(t, addr)
	pipeline := "HELLO 3\r\nRL.LIMIT warm 10 1m\r\nRL.LIMIT cold:a 10 1m\r\nECHO after\r\nRL.LIMIT warm 10 1m\r\n"
	if _, err := io.WriteString(c, pipeline); err != nil {
		t.Fatal(err)
	}
	// HELLO 3's map: its header and 7 pairs, some nested; read until the first RL.LIMIT.
	line, _ := r.ReadString('\n')
	if !strings.HasPrefix(line, "%") {
		t.Fatalf("HELLO 3 answered %q", line)
	}
	for {
		line, _ = r.ReadString('\n')
		if line == "*5\r\n" {
			break
		}
	}
	readInts := func() []string {
		var out []string
		for range 5 {
			v, _ := r.ReadString('\n')
			out = append(out, strings.TrimSpace(v))
		}
		return out
	}
	if got := readInts(); got[0] != ":1" || got[2] != ":9" {
		t.Fatalf("first warm: %v", got)
	}
	if line, _ = r.ReadString('\n'); line != "*5\r\n" {
		t.Fatalf("cold reply header %q", line)
	}
	if got := readInts(); got[0] != ":1" || got[2] != ":9" {
		t.Fatalf("cold: %v", got)
	}
	if line, _ = r.ReadString('\n'); line != "$5\r\n" {
		t.Fatalf("ECHO header %q", line)
	}
	if line, _ = r.ReadString('\n'); line != "after\r\n" {
		t.Fatalf("ECHO %q", line)
	}
	if line, _ = r.ReadString('\n'); line != "*5\r\n" {
		t.Fatalf("second warm header %q", line)
	}
	if got := readInts(); got[2] != ":8" {
		t.Fatalf("second warm: %v (want remaining 8: counted once each)", got)
	}
	if n, m := lim.waits.Load(), lim.tries.Load(); n != 1 || m != 1 {
		t.Fatalf("the cold request was tried %d times and waited %d times, want 1 and 1", m, n)
	}
	// HELLO 3 carried over: RL.STATUS answers a RESP3 map.
	if _, err := io.WriteString(c, "RL.STATUS warm 1m\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, _ = r.ReadString('\n'); line != "%10\r\n" {
		t.Fatalf("RL.STATUS after the hand-over: %q, want a RESP3 map of 10", line)
	}
	for range 10*3 + 1 { // the rest of the map: 10 names (2 lines each), 9 integers, "local"
		_, _ = r.ReadString('\n')
	}
	// The connection went back to its loop; it goes on answering there, in order, with a
	// cold request served aside again.
	deadline := time.Now().Add(5 * time.Second)
	for srv.ConnStats().HandBacks == 0 && time.Now().Before(deadline) {
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			t.Fatal(err)
		}
		if line, _ = r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("PING: %q", line)
		}
	}
	if srv.ConnStats().HandBacks == 0 {
		t.Fatal("the connection never went back to its loop")
	}
	if _, err := io.WriteString(c, "RL.LIMIT cold:a 10 1m\r\nRL.LIMIT warm 10 1m\r\n"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{":8", ":7"} {
		if line, _ = r.ReadString('\n'); line != "*5\r\n" {
			t.Fatalf("after the return: header %q", line)
		}
		if got := readInts(); got[2] != want {
			t.Fatalf("after the return: %v, want remaining %s", got, want)
		}
	}
	if n, m := lim.waits.Load(), lim.tries.Load(); n != 2 || m != 2 {
		t.Fatalf("cold requests were tried %d times and waited %d times, want 2 and 2", m, n)
	}
}

// TestNoDescriptorLeak: connections that come and go (served, QUIT, dropped mid-request,
// or handed to a goroutine) leave no descriptor and no session behind.
func TestNoDescriptorLeak(t *testing.T) { eachMode(t, testNoDescriptorLeak) }

func testNoDescriptorLeak(t *testing.T, loop bool) {
	srv, addr := start(t, server.Config{EventLoops: loops(loop)})
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(entries)
	}
	before := fds()
	for i := range 200 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		switch i % 3 {
		case 0:
			_, _ = io.WriteString(c, "PING\r\n")
			_, _ = bufio.NewReader(c).ReadString('\n')
		case 1:
			_, _ = io.WriteString(c, "QUIT\r\n")
			_, _ = io.ReadAll(c)
		case 2:
			_, _ = io.WriteString(c, "*3\r\n$4\r\nECHO\r\n") // left incomplete
		}
		_ = c.Close()
	}
	testwait.Until(t, 5*time.Second, "no session or descriptor left after every client closed", func() (bool, string) {
		n, open := srv.ConnStats().Connected, fds()
		return n == 0 && open <= before, fmt.Sprintf("%d sessions, %d descriptors open, %d before the clients came", n, open, before)
	})
}
