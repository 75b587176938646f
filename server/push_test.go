package server_test

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

// pushHandler serves SUB (the connection listens), PUB n size (n pushes of size bytes to
// every listener but the sender; reply: how many were taken) and anything else with +OK.
type pushHandler struct {
	mu   sync.Mutex
	subs map[*server.Conn]bool
}

type pushSession struct {
	h *pushHandler
	c *server.Conn
}

func (h *pushHandler) Open(c *server.Conn, _ int64) server.Session { return &pushSession{h, c} }

func (s *pushSession) Serve(w *resp.Writer, args [][]byte) {
	switch strings.ToUpper(string(args[0])) {
	case "SUB":
		s.h.mu.Lock()
		s.h.subs[s.c] = true
		s.h.mu.Unlock()
		w.OK()
	case "PUB":
		var n, size int
		_, _ = fmt.Sscan(string(args[1]), &n)
		_, _ = fmt.Sscan(string(args[2]), &size)
		s.h.mu.Lock()
		defer s.h.mu.Unlock()
		taken := 0
		for i := 0; i < n; i++ {
			msg := []byte("+" + strings.Repeat("x", size) + "\r\n")
			for c := range s.h.subs {
				if c != s.c && c.Push(msg) {
					taken++
				}
			}
		}
		w.Int(int64(taken))
	default:
		w.OK()
	}
}

func (s *pushSession) Touch(int64) {}
func (s *pushSession) Proto() int  { return 2 }
func (s *pushSession) Internal() bool {
	return false
}
func (s *pushSession) Close() {
	s.h.mu.Lock()
	delete(s.h.subs, s.c)
	s.h.mu.Unlock()
}

func startPush(t *testing.T, loop bool, limit int) (*server.Server, string) {
	return startWith(t, server.Config{EventLoops: loops(loop), PushLimit: limit},
		func(*server.Server) server.Handler { return &pushHandler{subs: map[*server.Conn]bool{}} })
}

// TestPushBetweenReplies: pushes from another connection reach a listener that is busy
// with pipelined requests whole, between its replies, every one of them, in both
// connection models.
func TestPushBetweenReplies(t *testing.T) {
	eachMode(t, func(t *testing.T, loop bool) {
		_, addr := startPush(t, loop, 0)
		sub, subR := dial(t, addr)
		pub, pubR := dial(t, addr)
		if _, err := io.WriteString(sub, "SUB\r\n"); err != nil {
			t.Fatal(err)
		}
		if line := readLine(t, subR); line != "+OK" {
			t.Fatalf("SUB = %q", line)
		}
		const rounds, size = 200, 1000
		done := make(chan struct{})
		go func() { // the listener pipelines requests meanwhile
			defer close(done)
			for i := 0; i < rounds; i++ {
				if _, err := io.WriteString(sub, "*1\r\n$4\r\nPING\r\n"); err != nil {
					return
				}
			}
		}()
		for i := 0; i < rounds; i++ {
			if _, err := io.WriteString(pub, "PUB 1 "+fmt.Sprint(size)+"\r\n"); err != nil {
				t.Fatal(err)
			}
			if line := readLine(t, pubR); line != ":1" {
				t.Fatalf("PUB = %q", line)
			}
		}
		<-done
		oks, pushes := 0, 0
		for oks < rounds || pushes < rounds {
			switch line := readLine(t, subR); {
			case line == "+OK":
				oks++
			case line == "+"+strings.Repeat("x", size):
				pushes++
			default:
				t.Fatalf("after %d replies and %d pushes: %.40q", oks, pushes, line)
			}
		}
	})
}

// TestPushLimitCuts: a listener that reads nothing is closed once its unread pushes pass
// PushLimit, counted in ConnStats; Push reports false from then on.
func TestPushLimitCuts(t *testing.T) {
	eachMode(t, func(t *testing.T, loop bool) {
		srv, addr := startPush(t, loop, 256<<10)
		sub, subR := dial(t, addr)
		pub, pubR := dial(t, addr)
		if _, err := io.WriteString(sub, "SUB\r\n"); err != nil {
			t.Fatal(err)
		}
		readLine(t, subR)
		for n, taken := 0, "1"; taken == "1"; n++ { // 64 KiB at a time: at most 64 MiB
			if n == 1024 {
				t.Fatal("the listener that reads nothing was never cut")
			}
			if _, err := io.WriteString(pub, "PUB 1 65536\r\n"); err != nil {
				t.Fatal(err)
			}
			taken = strings.TrimPrefix(readLine(t, pubR), ":")
		}
		testwait.UntilTrue(t, 10*time.Second, "the cut to be counted", func() bool { return srv.ConnStats().PushCuts == 1 })
		_ = sub.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, subR); err != nil {
			t.Fatalf("the cut connection was not closed: %v", err)
		}
	})
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (so far %.40q)", err, line)
	}
	return strings.TrimSuffix(line, "\r\n")
}
