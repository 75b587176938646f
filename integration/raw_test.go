package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A small RESP2/RESP3 reader for tests that need to see the exact wire: which type came
// back, what is left after a protocol error.

// respError is an error reply ("-ERR ...", without the '-').
type respError string

// respMap is a RESP3 map, in wire order.
type respMap []respKV

type respKV struct{ K, V any }

// get returns the value of the first pair whose key is the string k.
func (m respMap) get(k string) (any, bool) {
	for _, kv := range m {
		if s, ok := kv.K.(string); ok && s == k {
			return kv.V, true
		}
	}
	return nil, false
}

// respNull is the RESP3 null ("_") and the RESP2 null bulk or array.
type respNull struct{}

// readValue reads one reply. Simple strings and bulk strings are Go strings, integers
// int64, arrays, sets and pushes []any.
func readValue(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '_':
		return respNull{}, nil
	case '#':
		return body == "t", nil
	case ',', '(':
		return body, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return respNull{}, nil
		}
		if n > 64<<20 {
			return nil, fmt.Errorf("bulk too long: %d", n)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if line[0] == '!' {
			return respError(buf[:n]), nil
		}
		return string(buf[:n]), nil
	case '*', '~', '>':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		if n < 0 {
			return respNull{}, nil
		}
		if n > 1<<20 {
			return nil, fmt.Errorf("array too long: %d", n)
		}
		out := make([]any, 0, n)
		for range n {
			v, err := readValue(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 || n > 1<<20 {
			return nil, fmt.Errorf("bad map length %q", line)
		}
		out := make(respMap, 0, n)
		for range n {
			k, err := readValue(r)
			if err != nil {
				return nil, err
			}
			v, err := readValue(r)
			if err != nil {
				return nil, err
			}
			out = append(out, respKV{k, v})
		}
		if line[0] == '|' { // an attribute precedes the real reply
			return readValue(r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", line)
}

// readLine reads up to CRLF, refusing lines over 1 MiB.
func readLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() <= 1<<20 {
		chunk, err := r.ReadSlice('\n')
		b.Write(chunk)
		if err == nil {
			s := b.String()
			if !strings.HasSuffix(s, "\r\n") {
				return "", fmt.Errorf("reply line not terminated by CRLF: %q", s)
			}
			return s[:len(s)-2], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if b.Len() > 0 && errors.Is(err, io.EOF) {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
	return "", errors.New("reply line over 1 MiB")
}

// encode writes args as one RESP array of bulk strings.
func encode(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// rawConn is a plain TCP connection with a RESP reader.
type rawConn struct {
	t testing.TB
	net.Conn
	r *bufio.Reader
}

// dialRaw connects to addr; the connection is closed at the end of the test.
func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// send writes one command.
func (c *rawConn) send(args ...string) {
	c.t.Helper()
	c.write(encode(args...))
}

// write writes raw bytes.
func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read reads one reply, waiting at most 10 s.
func (c *rawConn) read() any {
	c.t.Helper()
	v, err := c.tryRead(10 * time.Second)
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	return v
}

func (c *rawConn) tryRead(wait time.Duration) (any, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return readValue(c.r)
}

// do sends one command and reads its reply.
func (c *rawConn) do(args ...string) any {
	c.t.Helper()
	c.send(args...)
	return c.read()
}

// expectEOF reads until the server closes the connection (within 5 s); it fails if any
// further reply arrives.
func (c *rawConn) expectEOF() {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := c.r.ReadByte()
	switch {
	case err == nil:
		rest, _ := c.r.Peek(c.r.Buffered())
		c.t.Fatalf("expected the connection to be closed, got more bytes: %q", append([]byte{b}, rest...))
	case errors.Is(err, io.EOF), isReset(err):
	default:
		c.t.Fatalf("expected EOF, got %v", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout() &&
		(strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe"))
}

// expectPong checks that the connection still serves: PING gets +PONG.
func (c *rawConn) expectPong() {
	c.t.Helper()
	if v := c.do("PING"); v != "PONG" {
		c.t.Fatalf("PING: got %#v, want PONG", v)
	}
}

// asError returns the error text of v, failing when v is not an error reply.
func asError(t testing.TB, v any) string {
	t.Helper()
	e, ok := v.(respError)
	if !ok {
		t.Fatalf("expected an error reply, got %#v", v)
	}
	return string(e)
}

// ints converts an array reply of integers.
func ints(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("expected an array of integers, got %T %#v", v, v)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("element %d is %T %#v, not an integer (reply %#v)", i, e, e, v)
		}
		out[i] = n
	}
	return out
}
