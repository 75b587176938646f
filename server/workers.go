package server

import "time"

// The goroutines that serve a loop's connection aside (serveAside, loop_linux.go) are
// kept for the next one, idle for at most workerIdle: a new goroutine starts on a small
// stack, which a script's deep calls grow, copying it at each doubling (5% of the CPU of
// an interpreted script on a hot key, where every batch went to a new goroutine).
const workerIdle = 10 * time.Second

// goAside runs fn on an idle worker, or on a new one.
func (s *Server) goAside(fn func()) {
	select {
	case s.work <- fn:
	default:
		go s.worker(fn)
	}
}

// worker runs fn, then what goAside hands it, until it has been idle for workerIdle or
// the server shuts down.
func (s *Server) worker(fn func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		fn()
		fn = nil // what fn held is not kept while idle
		t.Reset(workerIdle)
		select {
		case fn = <-s.work:
		case <-t.C:
			return
		case <-s.quit:
			return
		}
	}
}
