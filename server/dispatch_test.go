package server_test

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

// countingHandler counts how each request is dispatched. "WAIT x" must wait on the
// network: under Conn.NoWait it sets WouldBlock (a try), else it answers "+x" (a wait).
// "BIG n" answers a bulk string of n bytes; anything else answers "+" and its name.
type countingHandler struct {
	mu    sync.Mutex
	tries map[string]int // "WAIT x" served under NoWait
	waits map[string]int // "WAIT x" served where it may wait
	// gate, when set, holds "WAIT gated" where it may wait: it tells entered, then waits
	// for gate.
	gate, entered chan struct{}
	ended         chan struct{} // "CTXWAIT" tells it once its wait is over
}

func newCountingHandler() *countingHandler {
	return &countingHandler{tries: map[string]int{}, waits: map[string]int{}}
}

func (h *countingHandler) Open(c *server.Conn, _ int64) server.Session {
	return &countingSession{h: h, c: c}
}

func (h *countingHandler) counts(key string) (tries, waits int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tries[key], h.waits[key]
}

type countingSession struct {
	h *countingHandler
	c *server.Conn
}

func (s *countingSession) Serve(w *resp.Writer, args [][]byte) {
	name := strings.ToUpper(string(args[0]))
	switch {
	case name == "WAIT" && len(args) == 2:
		key := string(args[1])
		if key == "gated" && !s.c.NoWait && s.h.gate != nil {
			s.h.entered <- struct{}{}
			<-s.h.gate
		}
		s.h.mu.Lock()
		defer s.h.mu.Unlock()
		if s.c.NoWait {
			s.h.tries[key]++
			s.c.WouldBlock = true
			return
		}
		s.h.waits[key]++
		w.Simple(key)
	case name == "CTXWAIT" && !s.c.NoWait:
		// Waits on the connection's context, as an edge's call to its origin does.
		s.h.entered <- struct{}{}
		select {
		case <-s.c.Context().Done():
			w.Simple("ended")
		case <-time.After(time.Minute):
			w.Simple("timeout")
		}
		s.h.ended <- struct{}{}
	case name == "CTXWAIT":
		s.c.WouldBlock = true
	case name == "BIG" && len(args) == 2:
		var n int
		_, _ = fmt.Sscan(string(args[1]), &n)
		w.Bulk([]byte(strings.Repeat("b", n)))
	case name == "QUIT":
		s.c.Quit = true
		w.OK()
	default:
		w.Simple(name)
	}
}

func (s *countingSession) Touch(int64)    {}
func (s *countingSession) Proto() int     { return 2 }
func (s *countingSession) Internal() bool { return false }
func (s *countingSession) Close()         {}

// TestWaitDispatchedOnce: a request that must wait is dispatched at most twice, once tried
// on an event loop (which finds it must wait) and once where it may wait; never tried
// again off the loop. The requests after it in its batch are served once each, where they
// may wait; replies keep their order, through an incomplete request left at the end of
// the batch, replies past the early-write threshold, and QUIT; and the connection goes
// back to its loop, where a later request that must wait is tried there again.
func TestWaitDispatchedOnce(t *testing.T) { eachMode(t, testWaitDispatchedOnce) }

func testWaitDispatchedOnce(t *testing.T, loop bool) {
	tries := 0
	if loop {
		tries = 1 // the loop's own attempt, which finds the request must wait
	}
	big := 300 << 10 // past the server's early-write threshold (flushAt)
	type step struct {
		send string   // written after the replies of the step before
		want []string // the reply lines it completes, in order (a bulk string as its header)
	}
	tests := []struct {
		name  string
		steps []step
		// each WAIT key's count of tries (under NoWait; -1: any) and of waits
		counts map[string][2]int
		closed bool // the server closes the connection after the replies
	}{
		{name: "alone", steps: []step{{"WAIT a\r\n", []string{"+a"}}},
			counts: map[string][2]int{"a": {tries, 1}}},
		{name: "pipeline", steps: []step{{"PING\r\nWAIT a\r\nPING\r\nWAIT b\r\nECHO\r\n",
			[]string{"+PING", "+a", "+PING", "+b", "+ECHO"}}},
			counts: map[string][2]int{"a": {tries, 1}, "b": {0, 1}}},
		{name: "incomplete rest", steps: []step{{"WAIT a\r\nPI", []string{"+a"}}, {"NG\r\nWAIT b\r\n", []string{"+PING", "+b"}}},
			counts: map[string][2]int{"a": {tries, 1}, "b": {tries, 1}}},
		// The replies to WAIT a and BIG pass the early-write threshold: WAIT b, after them,
		// is served once they are written, from the loop again.
		{name: "large replies", steps: []step{{fmt.Sprintf("WAIT a\r\nBIG %d\r\nWAIT b\r\nPING\r\nWAIT c\r\n", big),
			[]string{"+a", fmt.Sprintf("$%d", big), "+b", "+PING", "+c"}}},
			counts: map[string][2]int{"a": {tries, 1}, "b": {-1, 1}, "c": {-1, 1}}},
		{name: "quit", steps: []step{{"WAIT a\r\nQUIT\r\nPING\r\n", []string{"+a", "+OK"}}},
			counts: map[string][2]int{"a": {tries, 1}}, closed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newCountingHandler()
			srv, addr := startWith(t, server.Config{EventLoops: loops(loop)}, func(*server.Server) server.Handler { return h })
			c, r := dial(t, addr)
			for _, st := range tc.steps {
				if _, err := io.WriteString(c, st.send); err != nil {
					t.Fatal(err)
				}
				for _, line := range st.want {
					if got := readReply(t, r); got != line {
						t.Fatalf("reply %q, want %q (steps %q)", got, line, tc.steps)
					}
				}
			}
			if tc.closed {
				if b, err := r.ReadByte(); err == nil {
					t.Fatalf("the connection stayed open after QUIT: read %q", b)
				}
			}
			for key, wc := range tc.counts {
				gotTries, gotWaits := h.counts(key)
				if (wc[0] >= 0 && gotTries != wc[0]) || gotWaits != wc[1] {
					t.Errorf("WAIT %s: tried %d times under NoWait and served %d times where it may wait; want %d and %d",
						key, gotTries, gotWaits, wc[0], wc[1])
				}
				if gotTries > tries {
					t.Errorf("WAIT %s tried %d times under NoWait: at most %d", key, gotTries, tries)
				}
			}
			if loop && !tc.closed {
				waitStat(t, srv, "the connection went back to its loop", func() bool { return srv.ConnStats().HandBacks > 0 })
				// Back on its loop: a request that must wait is tried there, then served once more.
				if _, err := io.WriteString(c, "WAIT z\r\n"); err != nil {
					t.Fatal(err)
				}
				if got := readReply(t, r); got != "+z" {
					t.Fatalf("after the return: %q", got)
				}
				if gotTries, gotWaits := h.counts("z"); gotTries != 1 || gotWaits != 1 {
					t.Errorf("WAIT z after the return: tried %d, waited %d; want 1 and 1", gotTries, gotWaits)
				}
			}
		})
	}
}

// readReply reads one reply line (CRLF dropped); a bulk string's body is read and dropped.
func readReply(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read reply: %v (so far %q)", err, line)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if strings.HasPrefix(line, "$") {
		var n int
		_, _ = fmt.Sscan(line[1:], &n)
		if _, err := io.CopyN(io.Discard, r, int64(n)+2); err != nil {
			t.Fatalf("read bulk of %d: %v", n, err)
		}
	}
	return line
}

// TestWaitManyClients: many clients of one event loop whose requests must wait, served
// aside and given back at once, all get their replies (no wake-up of the loop is lost),
// each request tried at most once on the loop and served once more.
func TestWaitManyClients(t *testing.T) {
	h := newCountingHandler()
	_, addr := startWith(t, server.Config{EventLoops: 1}, func(*server.Server) server.Handler { return h })
	const clients, rounds = 20, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c, r := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range rounds {
				key := fmt.Sprintf("%d.%d", i, j)
				if _, err := fmt.Fprintf(c, "WAIT %s\r\nPING\r\n", key); err != nil {
					errs <- err
					return
				}
				for _, want := range []string{"+" + key, "+PING"} {
					line, err := r.ReadString('\n')
					if err != nil || line != want+"\r\n" {
						errs <- fmt.Errorf("client %d: reply %q, %v; want %q", i, line, err, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range clients {
		for j := range rounds {
			key := fmt.Sprintf("%d.%d", i, j)
			if tries, waits := h.counts(key); tries > 1 || waits != 1 {
				t.Fatalf("WAIT %s: tried %d times, waited %d; want at most 1 and 1", key, tries, waits)
			}
		}
	}
}

// TestWaitEventsWhileAway: while a goroutine serves a loop's connection, the client sends
// more (answered once the connection is back, in order) or leaves (the connection is then
// closed, and nothing of it is left).
func TestWaitEventsWhileAway(t *testing.T) {
	h := newCountingHandler()
	h.gate, h.entered = make(chan struct{}), make(chan struct{})
	srv, addr := startWith(t, server.Config{EventLoops: 1}, func(*server.Server) server.Handler { return h })
	c, r := dial(t, addr)
	if _, err := io.WriteString(c, "WAIT gated\r\n"); err != nil {
		t.Fatal(err)
	}
	<-h.entered
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	// The loop has the PING's event while the connection is away, if it looks before the
	// gate opens (it waits in epoll for nothing else).
	time.Sleep(50 * time.Millisecond)
	h.gate <- struct{}{}
	for _, want := range []string{"+gated", "+PING"} {
		if got := readReply(t, r); got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
	}

	gone, _ := dial(t, addr)
	if _, err := io.WriteString(gone, "WAIT gated\r\n"); err != nil {
		t.Fatal(err)
	}
	<-h.entered
	_ = gone.Close()
	time.Sleep(50 * time.Millisecond) // as above, for its hang-up
	h.gate <- struct{}{}
	waitStat(t, srv, "the connection whose client left while it was away closed", func() bool {
		return srv.ConnStats().Connected == 1
	})
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := readReply(t, r); got != "+PING" {
		t.Fatalf("the other connection then: %q", got)
	}
}

// TestContextEndsWhenClientLeaves: a request waiting on its connection's context (an edge's
// call to its origin) stops waiting as soon as its client hangs up, though the connection
// is away from its loop; a connection's context is live while it is open.
func TestContextEndsWhenClientLeaves(t *testing.T) {
	h := newCountingHandler()
	h.entered, h.ended = make(chan struct{}, 1), make(chan struct{}, 1)
	_, addr := startWith(t, server.Config{EventLoops: 1}, func(*server.Server) server.Handler { return h })
	c, _ := dial(t, addr)
	if _, err := io.WriteString(c, "CTXWAIT\r\n"); err != nil {
		t.Fatal(err)
	}
	<-h.entered
	select {
	case <-h.ended:
		t.Fatal("the wait ended while its client was still there")
	case <-time.After(50 * time.Millisecond):
	}
	_ = c.Close()
	select {
	case <-h.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the wait on the connection's context did not end when its client left")
	}
}
