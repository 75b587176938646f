//go:build !linux

package server

import (
	"net"

	"github.com/ratchet/ratchet/commands"
)

// loop is Linux only; elsewhere every connection has its own goroutine.
type loop struct{}

func (s *Server) startLoops(int) error { return nil }

func (s *Server) adopt(*net.TCPConn, *commands.Session) bool { return false }

func (l *loop) wake() {}

func loopsAvailable() bool { return false }
