package integration

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeAsync writes b from a goroutine (the server may close before reading it all) and
// returns a function that waits for the write to end.
func writeAsync(c net.Conn, b []byte) (wait func() error) {
	var (
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err = c.Write(b)
	}()
	return func() error { <-done; return err }
}

// expectProtocolError reads one reply, which must be "-ERR Protocol error...", and then
// the end of the connection.
func expectProtocolError(t *testing.T, c *rawConn) {
	t.Helper()
	v, err := c.tryRead(10 * time.Second)
	if err != nil {
		t.Fatalf("want -ERR Protocol error, got a read error: %v", err)
	}
	if msg := asError(t, v); !strings.HasPrefix(msg, "ERR Protocol error") {
		t.Fatalf("got %q, want ERR Protocol error...", msg)
	}
	c.expectEOF()
}

// Test 11: malformed or oversized requests are refused with a protocol error on their own
// connection; other clients keep being served and the process stays up.
func TestHostileProtocolInput(t *testing.T) {
	t.Parallel()
	p := start(t)
	stopPing := keepPinging(t, p.Addr, "")

	digits := strings.Repeat("1", 100)
	fatal := []struct {
		name  string
		input string
	}{
		{"bulk length near int64 max", "*1\r\n$9223372036854775800\r\n"},
		{"bulk length beyond int64", "*1\r\n$99999999999999999999\r\n"},
		{"bulk length over the bulk limit", "*1\r\n$600000\r\n"},
		{"array of a billion", "*999999999\r\n"},
		{"array over the argument limit", "*8193\r\n"}, // resp.DefaultLimits: 8192 arguments
		{"array length -5", "*-5\r\n"},
		{"bulk length -5", "*1\r\n$-5\r\n"},
		{"null bulk as an argument", "*1\r\n$-1\r\n"},
		{"array header of 100 digits without CRLF", "*" + digits},
		{"bulk header of 100 digits without CRLF", "*1\r\n$" + digits},
		{"bulk length not a number", "*1\r\n$abc\r\n"},
		{"array length not a number", "*x\r\n"},
		{"integer instead of bulk", "*1\r\n:5\r\n"},
		{"bulk longer than its length", "*1\r\n$3\r\nabcde\r\n"},
		{"header ended by LF only", "*1\n$4\r\nPING\r\n"},
		{"inline line of 70 KiB without newline", strings.Repeat("a", 70<<10)},
	}
	for _, tc := range fatal {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, p.Addr)
			wait := writeAsync(c, []byte(tc.input))
			expectProtocolError(t, c)
			_ = wait()
			p.requireRunning(t)
		})
	}

	t.Run("request over the per-connection buffer", func(t *testing.T) {
		// 1000 arguments of 2 KiB: each within bounds, 2 MB in all.
		var b bytes.Buffer
		b.WriteString("*1000\r\n")
		arg := encode(strings.Repeat("x", 2048))[4:] // "$2048\r\n...\r\n"
		for range 1000 {
			b.Write(arg)
		}
		c := dialRaw(t, p.Addr)
		wait := writeAsync(c, b.Bytes())
		expectProtocolError(t, c)
		_ = wait()
	})

	t.Run("empty requests are skipped", func(t *testing.T) {
		c := dialRaw(t, p.Addr)
		c.write([]byte("*0\r\n*-1\r\n\r\n  \r\nPING\r\n"))
		if v := c.read(); v != "PONG" {
			t.Fatalf("after *0, *-1 and blank lines: got %#v, want PONG", v)
		}
		c.expectPong()
	})

	t.Run("bulk without array is an inline command", func(t *testing.T) {
		// As in Redis: "$5" is read as an inline command named "$5", then "hello" is HELLO.
		c := dialRaw(t, p.Addr)
		c.write([]byte("$5\r\nhello\r\nPING\r\n"))
		if msg := asError(t, c.read()); msg != "ERR unknown command '$5', with args beginning with: " {
			t.Errorf("$5 line: %q", msg)
		}
		if v := c.read(); v == nil {
			t.Error("no reply to HELLO")
		} else if _, isErr := v.(respError); isErr {
			t.Errorf("hello line: %#v", v)
		}
		if v := c.read(); v != "PONG" {
			t.Errorf("PING: %#v", v)
		}
	})

	t.Run("1000 arguments of 1 KiB sent slowly", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString("*1000\r\n")
		arg := encode(strings.Repeat("a", 1024))[4:]
		for range 1000 {
			b.Write(arg)
		}
		req := b.Bytes()
		c := dialRaw(t, p.Addr)
		const chunk = 16 << 10
		for off := 0; off < len(req); off += chunk {
			end := min(off+chunk, len(req))
			c.write(req[off:end])
			if end < len(req) {
				// Nothing may come back before the request is complete.
				if v, err := c.tryRead(2 * time.Millisecond); err == nil {
					t.Fatalf("reply %#v before the request was complete", v)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		// Within every limit (1000 <= 8192 arguments, about 1 MB < the buffer): it is
		// served as a request, an unknown command.
		msg := asError(t, c.read())
		if !strings.HasPrefix(msg, "ERR unknown command '"+strings.Repeat("a", 128)+"'") {
			t.Fatalf("got %.200q, want an unknown command error", msg)
		}
		c.expectPong()
	})

	t.Run("random bytes", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 11))
		for i, prefix := range []string{"", "*", "*1\r\n$"} {
			junk := make([]byte, 256<<10)
			for j := range junk {
				junk[j] = byte(rng.UintN(256))
			}
			junk = append([]byte(prefix), junk...)
			c := dialRaw(t, p.Addr)
			wait := writeAsync(c, junk)
			// The server answers what it can parse and closes on the first protocol error,
			// or at our end of input.
			_ = wait()
			if tc, ok := c.Conn.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			out, err := io.ReadAll(io.LimitReader(c.r, 64<<20))
			if err != nil && !isReset(err) {
				t.Fatalf("random input %d: reading until the server closes: %v (got %d bytes)", i, err, len(out))
			}
			for _, line := range strings.Split(strings.TrimSuffix(string(out), "\r\n"), "\r\n") {
				if line != "" && line[0] != '-' {
					t.Errorf("random input %d: a reply that is not an error: %.100q", i, line)
					break
				}
			}
			t.Logf("random input %d (prefix %q): %d bytes of replies, ends %.120q", i, prefix, len(out), out[max(0, len(out)-120):])
			if prefix != "" && !strings.Contains(string(out), "-ERR Protocol error") {
				t.Errorf("random input after %q: no protocol error in %.200q", prefix, out)
			}
			p.requireRunning(t)
		}
	})

	stopPing()
	p.requireRunning(t)
	if !pingOnce(p.Addr, false) {
		t.Error("the server does not answer PING after the hostile input")
	}
}

// Test 15: a client that sends without reading its replies is dropped after
// --write-timeout; other clients are served meanwhile.
func TestSlowReaderIsDropped(t *testing.T) {
	t.Parallel()
	p := start(t, "--write-timeout", "500ms")
	stopPing := keepPinging(t, p.Addr, "")
	watcher := p.client(t, nil)

	hog, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	hogAddr := hog.LocalAddr().String()

	chunk := bytes.Repeat([]byte("PING\r\n"), (1<<20)/6)
	var (
		wg      sync.WaitGroup
		written int
		werr    error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = hog.SetWriteDeadline(time.Now().Add(45 * time.Second))
		for written < 200<<20 { // bounded: 200 MB at most, never reading a reply
			n, err := hog.Write(chunk)
			written += n
			if err != nil {
				werr = err
				return
			}
		}
	}()
	wg.Wait()
	switch {
	case werr == nil:
		t.Fatalf("wrote %d MB of PINGs without reading and the server never dropped the connection", written>>20)
	case errors.Is(werr, os.ErrDeadlineExceeded):
		t.Fatalf("the server stopped reading but did not drop the connection within 45s (%d MB written)", written>>20)
	case !isReset(werr):
		t.Fatalf("write: %v", werr)
	}
	t.Logf("dropped after %d MB written: %v", written>>20, werr)

	stopPing()
	p.requireRunning(t)
	// The server no longer lists the hog.
	ok := false
	for i := 0; i < 100 && !ok; i++ {
		list, err := watcher.ClientList(t.Context()).Result()
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		ok = !strings.Contains(list, "addr="+hogAddr+" ")
		if !ok {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !ok {
		t.Errorf("the dropped client %s is still in CLIENT LIST", hogAddr)
	}
	if n := infoInt(t, watcher, "cells"); n != 0 {
		t.Errorf("cells = %d", n)
	}
}
