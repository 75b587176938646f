package scripting_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/scripting"
)

// vector is one EVAL and the replies redis-server 7.0.15 gave it, to a RESP2 and to a
// RESP3 client (recorded_test.go). loose vectors are those whose message gopher-lua words
// differently from Lua 5.1 (a runtime or syntax error): only the error code and the
// " script: <sha>, on @user_script:<line>." tail must match.
type vector struct {
	group, script string
	keys, args    []string
	want2, want3  string
	loose         bool
}

func bs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// run runs v on a fresh keyspace and returns the replies in RESP2 and RESP3.
func (v vector) run(e *scripting.Engine) (string, string) {
	r := e.Run(context.Background(), scripting.Request{Body: []byte(v.script), Keys: bs(v.keys), Args: bs(v.args)}, newFake())
	r3 := e.Run(context.Background(), scripting.Request{Body: []byte(v.script), Keys: bs(v.keys), Args: bs(v.args)}, newFake())
	return string(r.Append(nil, 2)), string(r3.Append(nil, 3))
}

// same compares a reply with redis-server's, loosely for the loose vectors.
func (v vector) same(got, want string) bool {
	if got == want {
		return true
	}
	if !v.loose || !strings.HasPrefix(want, "-") {
		return false
	}
	code := func(s string) string { c, _, _ := strings.Cut(s, " "); return c }
	tail := func(s string) string { _, t, _ := strings.Cut(s, " script: "); return t }
	return code(got) == code(want) && tail(got) == tail(want)
}

func TestRecorded(t *testing.T) {
	e := scripting.New(scripting.Config{})
	for _, v := range recorded {
		got2, got3 := v.run(e)
		if !v.same(got2, v.want2) {
			t.Errorf("%s %q RESP2:\n got  %q\n want %q", v.group, v.script, got2, v.want2)
		}
		if !v.same(got3, v.want3) {
			t.Errorf("%s %q RESP3:\n got  %q\n want %q", v.group, v.script, got3, v.want3)
		}
	}
}

// TestRecordedLive replays the vectors on a redis-server started here, when one is
// installed (required under RATCHET_CI=1), to catch a recording that went stale.
func TestRecordedLive(t *testing.T) {
	addr := startRedisServer(t)
	c2, c3 := dialRESP(t, addr), dialRESP(t, addr)
	c3.do(t, "HELLO", "3")
	for _, v := range recorded {
		args := append([]string{"EVAL", v.script, strconv.Itoa(len(v.keys))}, append(v.keys, v.args...)...)
		c2.do(t, "FLUSHALL")
		got2 := c2.do(t, args...)
		c2.do(t, "FLUSHALL")
		got3 := c3.do(t, args...)
		if got2 != v.want2 || got3 != v.want3 {
			t.Errorf("%q: redis-server now answers\n %q\n %q\nrecorded\n %q\n %q", v.script, got2, got3, v.want2, v.want3)
		}
	}
}

// startRedisServer starts redis-server on a free loopback port with no persistence, as
// integration's helper of the same name; it skips without one unless RATCHET_CI=1.
func startRedisServer(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RATCHET_CI") == "1" {
			t.Fatal("redis-server not installed (apt-get install -y redis-server)")
		}
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	testwait.Until(t, 30*time.Second, "redis-server to listen", func() (bool, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return addr
}

// respConn sends commands and reads each whole reply as raw bytes.
type respConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c: c, br: bufio.NewReader(c)}
}

func (r *respConn) do(t *testing.T, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := r.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := r.read(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func (r *respConn) read(out *strings.Builder) error {
	line, err := r.br.ReadString('\n')
	if err != nil {
		return err
	}
	out.WriteString(line)
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$', '=', '!':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.br, buf); err != nil {
			return err
		}
		out.Write(buf)
	case '*', '~', '>':
		for range max(n, 0) {
			if err := r.read(out); err != nil {
				return err
			}
		}
	case '%', '|':
		for range 2 * n {
			if err := r.read(out); err != nil {
				return err
			}
		}
	}
	return nil
}
