//go:build !linux

package server

import (
	"net"
)

// loop is Linux only; elsewhere every connection has its own goroutine.
type loop struct{}

func (s *Server) startLoops(int) error { return nil }

func (s *Server) adopt(*net.TCPConn, *conn) bool { return false }

func (l *loop) evict() {}

func (l *loop) wake() {}

func loopsAvailable() bool { return false }

// unsent is known on Linux only; elsewhere a write timeout counts from the last write
// that took bytes.
func unsent(net.Conn) (int, bool) { return 0, false }
