//go:build linux

package server

import (
	"crypto/tls"
	"net"
	"syscall"
	"unsafe"
)

// unsentFD returns the bytes in the socket's send queue that the peer has not taken yet
// (SIOCOUTQ). The kernel reports a socket writable only once a third of its buffer is
// free, so a client that reads slowly but steadily can go a while with no write of ours
// making progress; a shrinking queue shows that it reads.
func unsentFD(fd int) (int, bool) {
	var n int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	return int(n), errno == 0
}

// unsent is unsentFD of a net.Conn (TLS: of the connection under it).
func unsent(nc net.Conn) (int, bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	q, qok := 0, false
	if err := rc.Control(func(fd uintptr) { q, qok = unsentFD(int(fd)) }); err != nil {
		return 0, false
	}
	return q, qok
}
