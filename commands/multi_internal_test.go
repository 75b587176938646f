package commands

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

type noHost struct{}

func (noHost) Sessions() []server.Session  { return nil }
func (noHost) ConnStats() server.ConnStats { return server.ConnStats{} }

// serveArgs serves one request of args on s and returns the reply.
func serveArgs(d *Dispatcher, s *Session, args ...string) string {
	var w resp.Writer
	in := make([][]byte, len(args))
	for i, a := range args {
		in[i] = []byte(a)
	}
	d.Serve(s, &w, in)
	return string(w.Bytes())
}

// TestTxBudgetAcrossSessions: the transactions of all connections together hold at most
// txBudget bytes; EXEC, DISCARD, Close and a session's garbage collection give them back.
func TestTxBudgetAcrossSessions(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Limiter: Local(eng), Host: noHost{}, Role: "origin"})
	d.txBudget = 1000
	serve := func(s *Session, args ...string) string { return serveArgs(d, s, args...) }
	a := NewSession(1, "127.0.0.1:1", "127.0.0.1:2", 0)
	b := NewSession(2, "127.0.0.1:3", "127.0.0.1:4", 0)
	serve(a, "MULTI")
	serve(b, "MULTI")
	if got := serve(a, "ECHO", string(bytes.Repeat([]byte("x"), 800))); got != "+QUEUED\r\n" {
		t.Fatalf("a's 800 bytes = %q", got)
	}
	if got := serve(b, "ECHO", string(bytes.Repeat([]byte("x"), 300))); got != "-"+errTxNoMemory+"\r\n" {
		t.Fatalf("b's 300 bytes past the budget = %q", got)
	}
	if n := d.txBytes.Load(); n <= 800 || n > 1000 {
		t.Fatalf("queued bytes = %d", n)
	}
	a.Close()
	if n := d.txBytes.Load(); n != 0 {
		t.Fatalf("queued bytes after Close = %d", n)
	}
	serve(b, "DISCARD")
	serve(b, "MULTI")
	if got := serve(b, "ECHO", "y"); got != "+QUEUED\r\n" {
		t.Fatalf("b after a closed = %q", got)
	}
	serve(b, "EXEC")
	if n := d.txBytes.Load(); n != 0 {
		t.Fatalf("queued bytes after EXEC = %d", n)
	}

	// A session dropped inside MULTI without Close gives its bytes back when collected.
	func() {
		c := NewSession(3, "127.0.0.1:5", "127.0.0.1:6", 0)
		serve(c, "MULTI")
		serve(c, "ECHO", "zzzz")
	}()
	for deadline := time.Now().Add(10 * time.Second); d.txBytes.Load() != 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := d.txBytes.Load(); n != 0 {
		t.Fatalf("queued bytes of a collected session = %d", n)
	}
}
