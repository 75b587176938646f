package resp

import (
	"bufio"
	"errors"
	"io"
)

// This file is the client side: a bounded reader of the replies a node gets from another
// node (package upstream). It understands only what the internal protocol answers: simple
// strings ("+OK"), errors ("-ERR ..."), flat arrays of integers, and bulk strings (a
// forwarded command's reply, carried whole).

// ReplyKind tells what a Reply holds.
type ReplyKind uint8

// The kinds of reply a ReplyReader accepts.
const (
	SimpleReply ReplyKind = iota + 1 // "+OK": Reply.Text holds "OK"
	ErrorReply                       // "-ERR msg": Reply.Text holds "ERR msg"
	IntsReply                        // "*n" of n ":i": Reply.Ints holds them
	BulkReply                        // "$n" and n bytes: Reply.Text holds them
)

// MaxReplyBulk bounds the bytes of a bulk reply.
const MaxReplyBulk = 4 << 20

// MaxReplyLine bounds one line of a reply (a simple string, an error, a header, an
// integer), CRLF included. A longer line is a protocol error.
const MaxReplyLine = 4096

// Reply is one reply read by a ReplyReader.
type Reply struct {
	Kind ReplyKind
	// Text is the simple string, the error message or the bulk string, without the type
	// byte and CRLF. It aliases the reader's buffer: it is valid until the next Read.
	Text []byte
	// Ints are the integers of an IntsReply, appended to the dst given to Read.
	Ints []int64
}

// ReplyReader reads replies from a stream. Every size is checked before anything is
// allocated or looped over: an array header may claim at most maxInts elements, a line
// at most MaxReplyLine bytes. It is owned by one goroutine.
type ReplyReader struct {
	br      *bufio.Reader
	maxInts int
	bulk    []byte // a bulk reply's bytes, reused
}

// NewReplyReader returns a reader of the replies on r whose integer arrays hold at most
// maxInts elements.
func NewReplyReader(r io.Reader, maxInts int) *ReplyReader {
	return &ReplyReader{br: bufio.NewReaderSize(r, MaxReplyLine), maxInts: maxInts}
}

// Read reads one reply. The integers of an array are appended to dst[:0]. It returns
// io.EOF when the stream ends between replies, io.ErrUnexpectedEOF when it ends inside
// one, a *ProtocolError for a malformed, oversized or unsupported reply (after which the
// stream cannot be resynchronised), and the underlying reader's other errors as they are.
func (r *ReplyReader) Read(dst []int64) (Reply, error) {
	line, err := r.line()
	if err != nil {
		return Reply{}, err
	}
	switch line[0] {
	case '+':
		return Reply{Kind: SimpleReply, Text: line[1:]}, nil
	case '-':
		return Reply{Kind: ErrorReply, Text: line[1:]}, nil
	case '*':
		n, ok := parseInt(line[1:])
		if !ok || n < 0 || n > int64(r.maxInts) {
			return Reply{}, protoErr("invalid reply array length")
		}
		// The header is within the bound but not otherwise trusted: storage grows with the
		// integers that actually arrive.
		ints := dst[:0]
		if cap(ints) == 0 {
			ints = make([]int64, 0, min(n, 64))
		}
		for i := int64(0); i < n; i++ {
			line, err := r.line()
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return Reply{}, err
			}
			if line[0] != ':' {
				return Reply{}, protoErr("expected ':' in reply array, got '%c'", printable(line[0]))
			}
			v, ok := parseInt(line[1:])
			if !ok {
				return Reply{}, protoErr("invalid integer in reply")
			}
			ints = append(ints, v)
		}
		return Reply{Kind: IntsReply, Ints: ints}, nil
	case '$':
		n, ok := parseInt(line[1:])
		if !ok || n < 0 || n > MaxReplyBulk {
			return Reply{}, protoErr("invalid bulk reply length")
		}
		if cap(r.bulk) < int(n)+2 {
			r.bulk = make([]byte, int(n)+2)
		}
		b := r.bulk[:n+2]
		if _, err := io.ReadFull(r.br, b); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Reply{}, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return Reply{}, protoErr("bulk reply not terminated by CRLF")
		}
		if cap(r.bulk) > 64<<10 { // a large buffer serves this reply only
			r.bulk = nil
		}
		return Reply{Kind: BulkReply, Text: b[:n]}, nil
	default:
		return Reply{}, protoErr("unexpected reply type '%c'", printable(line[0]))
	}
}

// line returns the next line without its CRLF; it has at least the type byte. It aliases
// the bufio buffer.
func (r *ReplyReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, protoErr("reply line longer than %d bytes", MaxReplyLine)
		}
		if err == io.EOF && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, protoErr("reply line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

// parseInt parses a decimal int64: an optional '-' and 1 to 19 digits, without overflow.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0') // 19 digits fit in a uint64
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
