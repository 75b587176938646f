// Package resp reads and writes the Redis serialization protocol.
//
// The reader is ours, not redcon's: every size is checked against Limits before anything
// is allocated or looped over, so no request header can make the server allocate, spin or
// panic. Replies are encoded with redcon's Append helpers, plus the RESP3 types (maps and
// the "_" null) that redcon lacks.
package resp

import (
	"bytes"
	"fmt"
)

// Limits bound what one connection's requests may claim. A request beyond them is a
// protocol error: the server answers "ERR Protocol error: ..." and closes the connection.
type Limits struct {
	MaxArgs   int // elements in one request array
	MaxBulk   int // bytes in one bulk string
	MaxInline int // bytes in one inline (telnet) request line
	MaxBuffer int // bytes buffered for one incomplete request
}

// DefaultLimits are Redis-like but sized for a rate limiter, whose commands are short
// (replay batches between nodes are the longest requests):
// Redis allows 512 MiB bulks; no Ratchet argument exceeds 1 KiB.
func DefaultLimits() Limits {
	return Limits{MaxArgs: 8192, MaxBulk: 512 << 10, MaxInline: 64 << 10, MaxBuffer: 1 << 20}
}

// maxHeader bounds the bytes of an array or bulk header line ("*1024\r\n").
const maxHeader = 32

// ProtocolError is a malformed or oversized request. The connection cannot be resynchronised
// after one and must be closed.
type ProtocolError struct{ Reason string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Reason }

func protoErr(format string, a ...any) error {
	return &ProtocolError{Reason: fmt.Sprintf(format, a...)}
}

// Parse reads one request from the start of buf. It returns the request's arguments
// (appended to dst[:0]; they alias buf) and the number of bytes consumed. n == 0 with a nil
// error means buf holds an incomplete request; the caller reads more, and must give up with
// ErrTooBig once len(buf) reaches lim.MaxBuffer. A request may have no arguments (an empty
// line or "*0"); the caller skips it.
func Parse(buf []byte, dst [][]byte, lim Limits) (args [][]byte, n int, err error) {
	args = dst[:0]
	if len(buf) == 0 {
		return args, 0, nil
	}
	if buf[0] != '*' {
		return parseInline(buf, args, lim)
	}
	count, pos, err := readHeader(buf, 1, lim.MaxArgs, "multibulk")
	if err != nil || pos == 0 {
		return args, 0, err
	}
	for i := int64(0); i < count; i++ {
		if pos >= len(buf) {
			return args, 0, nil
		}
		if buf[pos] != '$' {
			return args, 0, protoErr("expected '$', got '%c'", printable(buf[pos]))
		}
		size, next, err := readHeader(buf, pos+1, lim.MaxBulk, "bulk")
		if err != nil || next == 0 {
			return args, 0, err
		}
		if size < 0 {
			return args, 0, protoErr("invalid bulk length")
		}
		end := next + int(size)
		if end+2 > len(buf) {
			return args, 0, nil
		}
		if buf[end] != '\r' || buf[end+1] != '\n' {
			return args, 0, protoErr("bulk string not terminated by CRLF")
		}
		args = append(args, buf[next:end])
		pos = end + 2
	}
	return args, pos, nil
}

// ErrTooBig is returned by callers when an incomplete request outgrows Limits.MaxBuffer.
var ErrTooBig = &ProtocolError{Reason: "request exceeds the per-connection buffer limit"}

// readHeader parses the integer line that starts at buf[start] (after the type byte) and
// returns it with the position after its CRLF. pos == 0 means the line is incomplete.
// Values above max, or below -1, and malformed numbers are protocol errors.
func readHeader(buf []byte, start, max int, what string) (v int64, pos int, err error) {
	end := start + maxHeader
	if end > len(buf) {
		end = len(buf)
	}
	nl := bytes.IndexByte(buf[start:end], '\n')
	if nl < 0 {
		if len(buf)-start >= maxHeader {
			return 0, 0, protoErr("too big %s count string", what)
		}
		return 0, 0, nil
	}
	line := buf[start : start+nl]
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return 0, 0, protoErr("invalid %s length", what)
	}
	line = line[:len(line)-1]
	neg := len(line) > 0 && line[0] == '-'
	if neg {
		line = line[1:]
	}
	if len(line) == 0 || len(line) > 19 {
		return 0, 0, protoErr("invalid %s length", what)
	}
	for _, c := range line {
		if c < '0' || c > '9' {
			return 0, 0, protoErr("invalid %s length", what)
		}
		v = v*10 + int64(c-'0')
		if v > int64(max) {
			return 0, 0, protoErr("invalid %s length", what)
		}
	}
	if neg {
		if v > 1 {
			return 0, 0, protoErr("invalid %s length", what)
		}
		v = -v
	}
	return v, start + nl + 1, nil
}

// parseInline reads a telnet-style request: one line of space-separated words. Quotes are
// not interpreted.
func parseInline(buf []byte, args [][]byte, lim Limits) ([][]byte, int, error) {
	limit := min(len(buf), lim.MaxInline+1)
	nl := bytes.IndexByte(buf[:limit], '\n')
	if nl < 0 {
		if len(buf) > lim.MaxInline {
			return args, 0, protoErr("too big inline request")
		}
		return args, 0, nil
	}
	line := buf[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	for len(line) > 0 {
		i := 0
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		line = line[i:]
		j := 0
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		if j == 0 {
			break
		}
		if len(args) >= lim.MaxArgs {
			return args, 0, protoErr("invalid multibulk length")
		}
		args = append(args, line[:j])
		line = line[j:]
	}
	return args, nl + 1, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func printable(c byte) byte {
	if c < 0x20 || c > 0x7e {
		return '?'
	}
	return c
}

// ParseUint reads a strict non-negative decimal integer: digits only, no sign, no spaces,
// no leading zeros (except "0" itself), at most max. ok is false otherwise. Commands'
// arguments and the internal protocol's integers are read with it.
func ParseUint(b []byte, max uint64) (v uint64, ok bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	if len(b) <= 19 { // below 10^19: no uint64 overflow, one comparison at the end
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + uint64(c-'0')
		}
		return v, v <= max
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
