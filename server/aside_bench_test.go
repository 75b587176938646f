package server_test

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/server"
)

// roundTripHandler answers "WAIT" after a round trip to another goroutine where it may
// wait (as an edge's origin call parks its goroutine), and sets WouldBlock under NoWait;
// anything else at once.
type roundTripHandler struct{ calls chan chan struct{} }

func (h *roundTripHandler) Open(c *server.Conn, _ int64) server.Session {
	return &roundTripSession{h: h, c: c, done: make(chan struct{})}
}

type roundTripSession struct {
	h    *roundTripHandler
	c    *server.Conn
	done chan struct{}
}

func (s *roundTripSession) Serve(w *resp.Writer, args [][]byte) {
	if string(args[0]) != "WAIT" {
		w.Simple("OK")
		return
	}
	if s.c.NoWait {
		s.c.WouldBlock = true
		return
	}
	s.h.calls <- s.done
	<-s.done
	w.Simple("OK")
}

func (s *roundTripSession) Touch(int64)    {}
func (s *roundTripSession) Proto() int     { return 2 }
func (s *roundTripSession) Internal() bool { return false }
func (s *roundTripSession) Close()         {}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWaitAside: 50 clients of one event loop, each sending batches of pipe requests
// that all must wait, so that every batch is served aside (serveAside), or none (hot);
// reports the CPU of the whole process (clients included) per request.
func BenchmarkWaitAside(b *testing.B) {
	for _, bc := range []struct {
		req  string
		pipe int
	}{{"WAIT", 1}, {"WAIT", 16}, {"HOT", 1}, {"HOT", 16}} {
		pipe := bc.pipe
		b.Run(fmt.Sprintf("%s/P%d", bc.req, pipe), func(b *testing.B) {
			h := &roundTripHandler{calls: make(chan chan struct{}, 64)}
			go func() {
				for d := range h.calls {
					d <- struct{}{}
				}
			}()
			defer close(h.calls)
			_, addr := startWith(b, server.Config{EventLoops: 1}, func(*server.Server) server.Handler { return h })
			const clients = 50
			var batch []byte
			for range pipe {
				batch = append(batch, bc.req+"\r\n"...)
			}
			conns := make([]net.Conn, clients)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			per := b.N/(clients*pipe) + 1
			b.ResetTimer()
			cpu0 := cpuTime()
			var wg sync.WaitGroup
			for _, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := bufio.NewReader(c)
					for range per {
						if _, err := c.Write(batch); err != nil {
							return
						}
						for range pipe {
							if _, err := r.ReadString('\n'); err != nil {
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(per*clients*pipe), "cpu-ns/req")
		})
	}
}
