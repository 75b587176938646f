package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// throttleRig is a dispatcher with --requirepass pw and --cluster-secret cs on a clock
// the test moves.
type throttleRig struct {
	d   *Dispatcher
	now time.Time
}

func newThrottleRig() *throttleRig {
	eng := engine.New(engine.NewManualClock(1_000_000), engine.Config{MaxMemoryBytes: 1 << 20})
	r := &throttleRig{now: time.Unix(1_700_000_000, 0)}
	r.d = New(Options{Origin: eng, Host: noHost{}, Role: "origin", RequirePass: "pw", ClusterSecret: "cs",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.d.now = func() time.Time { return r.now }
	return r
}

func (r *throttleRig) serve(s *Session, args ...string) string {
	var w resp.Writer
	in := make([][]byte, len(args))
	for i, a := range args {
		in[i] = []byte(a)
	}
	r.d.Serve(s, &w, in)
	return string(w.Bytes())
}

const wrongPass = "-" + errWrongPass + "\r\n"

// TestAuthThrottleConnection: five failures of a connection are counted; a further wrong
// attempt within the backoff is throttled and closes the connection; the right password
// is accepted at any time, and a success resets the count.
func TestAuthThrottleConnection(t *testing.T) {
	r := newThrottleRig()
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	steps := []struct {
		advance         time.Duration
		cmd             []string
		want            string
		failed, refused uint64
		closing         bool
	}{
		{0, []string{"AUTH", "a"}, wrongPass, 1, 0, false},
		{0, []string{"AUTH", "default", "b"}, wrongPass, 2, 0, false},
		{0, []string{"HELLO", "3", "AUTH", "default", "c"}, wrongPass, 3, 0, false},
		{0, []string{"AUTH", "d"}, wrongPass, 4, 0, false},
		{0, []string{"AUTH", "e"}, wrongPass, 5, 0, false},  // the fifth: 100 ms over budget
		{0, []string{"AUTH", "pw"}, "+OK\r\n", 5, 0, false}, // right: accepted, the count reset
		{0, []string{"AUTH", "f"}, wrongPass, 6, 0, false},
		{0, []string{"AUTH", "g"}, wrongPass, 7, 0, false},
		{0, []string{"AUTH", "h"}, wrongPass, 8, 0, false},
		{0, []string{"AUTH", "i"}, wrongPass, 9, 0, false},
		{0, []string{"AUTH", "j"}, wrongPass, 10, 0, false},
		{99 * time.Millisecond, []string{"HELLO", "3", "AUTH", "default", "pw"}, "%7", 10, 0, false},
		{0, []string{"AUTH", "k"}, wrongPass, 11, 0, false}, // counted afresh after the success
		{0, []string{"AUTH", "l"}, wrongPass, 12, 0, false},
		{0, []string{"AUTH", "m"}, wrongPass, 13, 0, false},
		{0, []string{"AUTH", "n"}, wrongPass, 14, 0, false},
		{0, []string{"AUTH", "o"}, wrongPass, 15, 0, false},
		{99 * time.Millisecond, []string{"AUTH", "p"}, wrongPass, 15, 1, true}, // over budget: closed
		{0, []string{"AUTH", "pw"}, "+OK\r\n", 15, 1, false},                   // right: still accepted
	}
	for i, st := range steps {
		r.now = r.now.Add(st.advance)
		s.Quit = false
		got := r.serve(s, st.cmd...)
		if !strings.HasPrefix(got, strings.TrimSuffix(st.want, "\r\n")) {
			t.Fatalf("step %d %v = %q, want %q", i, st.cmd, got, st.want)
		}
		if a := r.d.AuthStats(); a.Failures != st.failed || a.Throttled != st.refused {
			t.Fatalf("step %d %v: stats %+v, want failures %d throttled %d", i, st.cmd, a, st.failed, st.refused)
		}
		if s.Closing() != st.closing {
			t.Fatalf("step %d %v: closing %v, want %v", i, st.cmd, s.Closing(), st.closing)
		}
	}
}

// TestAuthRightSecretAlwaysAccepted: however many wrong passwords and cluster secrets come
// from one address, over fresh connections, the right ones from that address are
// accepted every time (failure 1 of issue 20: wrong RL.INTERNAL.HELLO from an edge's
// address locked the edge out), and the wrong ones past the budget are throttled.
func TestAuthRightSecretAlwaysAccepted(t *testing.T) {
	r := newThrottleRig()
	id := int64(0)
	fresh := func() *Session {
		id++
		return NewSession(id, fmt.Sprintf("127.0.0.1:%d", 5000+id%50000), "127.0.0.1:6380", 0)
	}
	for i := range 2000 {
		r.now = r.now.Add(time.Millisecond)
		if got := r.serve(fresh(), "RL.INTERNAL.HELLO", "wrong", "n/1"); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Fatalf("wrong secret %d = %q", i, got)
		}
		if got := r.serve(fresh(), "AUTH", "wrong"); got != wrongPass {
			t.Fatalf("wrong password %d = %q", i, got)
		}
		if i%10 == 0 {
			if got := r.serve(fresh(), "RL.INTERNAL.HELLO", "cs", "node/1"); got != "+OK\r\n" {
				t.Fatalf("right secret after %d wrong ones = %q", i+1, got)
			}
			if got := r.serve(fresh(), "HELLO", "2", "AUTH", "default", "pw"); !strings.HasPrefix(got, "*14\r\n") {
				t.Fatalf("right password after %d wrong ones = %q", i+1, got)
			}
		}
	}
	a := r.d.AuthStats()
	if a.Failures+a.Throttled != 4000 || a.Throttled < 3900 {
		t.Fatalf("stats %+v; want 4000 wrong attempts, most of them throttled", a)
	}
}

// TestAuthThrottleAddress: 20 failures from one address, over any connections, put its
// further wrong attempts over budget (throttled, the connection closed); another
// address's wrong attempts are still counted; the cluster secret is throttled apart.
func TestAuthThrottleAddress(t *testing.T) {
	r := newThrottleRig()
	for i := range 20 {
		s := NewSession(int64(i), fmt.Sprintf("127.0.0.1:%d", 5000+i), "127.0.0.1:6380", 0)
		if got := r.serve(s, "AUTH", "x"); got != wrongPass || s.Closing() {
			t.Fatalf("failure %d = %q, closing %v", i, got, s.Closing())
		}
	}
	s := NewSession(100, "127.0.0.1:6000", "127.0.0.1:6380", 0)
	if got := r.serve(s, "AUTH", "y"); got != wrongPass || !s.Closing() {
		t.Fatalf("wrong password from the throttled address = %q, closing %v", got, s.Closing())
	}
	other := NewSession(101, "127.0.0.2:6000", "127.0.0.1:6380", 0)
	if got := r.serve(other, "AUTH", "y"); got != wrongPass || other.Closing() {
		t.Fatalf("wrong password from another address = %q, closing %v", got, other.Closing())
	}
	s = NewSession(102, "127.0.0.1:6001", "127.0.0.1:6380", 0)
	if got := r.serve(s, "RL.INTERNAL.HELLO", "wrong", "node/1"); !strings.HasPrefix(got, "-WRONGPASS") || s.Closing() {
		t.Fatalf("cluster secret from an address throttled for passwords = %q, closing %v", got, s.Closing())
	}
	r.now = r.now.Add(authBackoffMin)
	s = NewSession(103, "127.0.0.1:6002", "127.0.0.1:6380", 0)
	if got := r.serve(s, "AUTH", "z"); got != wrongPass || s.Closing() {
		t.Fatalf("wrong password after the backoff = %q, closing %v", got, s.Closing())
	}
	if a := r.d.AuthStats(); a.Failures != 23 || a.Throttled != 1 {
		t.Fatalf("stats %+v", a)
	}
}

// TestAuthThrottleGlobal: failures spread over many addresses, each within its own
// budget, put the whole server over budget past authFreeAllFailures; the right password
// is still accepted.
func TestAuthThrottleGlobal(t *testing.T) {
	r := newThrottleRig()
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d:5000", i>>16&255, i>>8&255, i&255) }
	for i := range authFreeAllFailures {
		if got := r.serve(NewSession(int64(i), addr(i), "", 0), "AUTH", "x"); got != wrongPass {
			t.Fatalf("failure %d = %q", i, got)
		}
	}
	s := NewSession(1<<20, addr(1<<20), "", 0)
	if got := r.serve(s, "AUTH", "x"); got != wrongPass || !s.Closing() {
		t.Fatalf("a new address's wrong password past the global budget = %q, closing %v", got, s.Closing())
	}
	if got := r.serve(NewSession(1<<20+1, addr(1<<20+1), "", 0), "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("right password past the global budget = %q", got)
	}
	if a := r.d.AuthStats(); a.Failures != authFreeAllFailures || a.Throttled != 1 {
		t.Fatalf("stats %+v", a)
	}
}

// TestAuthThrottleRate: 10,000 wrong guesses within one second, each over a fresh
// connection from one address, get fewer than 100 counted as failures (so logged and
// checked against the budget); all the rest throttled. The cluster secret likewise.
func TestAuthThrottleRate(t *testing.T) {
	for _, cmd := range [][]string{{"AUTH", "guess"}, {"RL.INTERNAL.HELLO", "guess", "n/1"}} {
		r := newThrottleRig()
		for i := range 10_000 {
			r.now = r.now.Add(100 * time.Microsecond)
			s := NewSession(int64(i), "127.0.0.1:5000", "127.0.0.1:6380", 0)
			if got := r.serve(s, cmd...); !strings.HasPrefix(got, "-WRONGPASS") {
				t.Fatalf("%v = %q", cmd, got)
			}
		}
		a := r.d.AuthStats()
		if a.Failures >= 100 || a.Failures+a.Throttled != 10_000 {
			t.Fatalf("%v: %+v; want fewer than 100 failures of 10,000", cmd, a)
		}
		t.Logf("%v: %d failures, %d throttled in 1 s", cmd[0], a.Failures, a.Throttled)
	}
}

// TestAuthThrottleBounded: at most authAddrs addresses are remembered; the least recently
// failed goes first.
func TestAuthThrottleBounded(t *testing.T) {
	th := newAuthThrottle("password")
	for i := range authAddrs + 10 {
		th.fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 1000)
	}
	if n := len(th.addrs); n != authAddrs || th.lru.Len() != authAddrs {
		t.Fatalf("%d addresses kept (list %d), want %d", n, th.lru.Len(), authAddrs)
	}
	if _, ok := th.addrs["10.0.0.0"]; ok {
		t.Fatal("the oldest address was kept")
	}
	if _, ok := th.addrs[fmt.Sprintf("10.0.%d.%d", (authAddrs+9)/256, (authAddrs+9)%256)]; !ok {
		t.Fatal("the newest address was dropped")
	}
	// An address's failures are forgotten after authForget without one.
	for range authFreeAddrFailures {
		th.fail("10.9.9.9", 1000)
	}
	if !th.blocked("10.9.9.9", 1000) {
		t.Fatal("not blocked after the free failures")
	}
	if n := th.fail("10.9.9.9", 1000+authForget.Milliseconds()+1); n != 1 {
		t.Fatalf("count after authForget = %d, want 1", n)
	}
}

// TestClusterSecretCompareFixedLength: RL.INTERNAL.HELLO compares the secret as SHA-256
// digests, so the constant-time compare always sees two 32-byte inputs whatever the length
// sent (a raw compare returns at once on a length mismatch, telling the secret's length).
func TestClusterSecretCompareFixedLength(t *testing.T) {
	r := newThrottleRig()
	var lens [][2]int
	defer func(f func(x, y []byte) int) { ctCompare = f }(ctCompare)
	ctCompare = func(x, y []byte) int {
		lens = append(lens, [2]int{len(x), len(y)})
		return subtle.ConstantTimeCompare(x, y)
	}
	for _, tt := range []struct{ secret, want string }{
		{"c", "-WRONGPASS"}, {"a-much-longer-wrong-secret", "-WRONGPASS"}, {"cx", "-WRONGPASS"}, {"cs", "+OK"},
	} {
		s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		lens = lens[:0]
		if got := r.serve(s, "RL.INTERNAL.HELLO", tt.secret, "edge1/a"); !strings.HasPrefix(got, tt.want) {
			t.Fatalf("HELLO %q = %q, want %s", tt.secret, got, tt.want)
		}
		if len(lens) != 1 || lens[0] != [2]int{sha256.Size, sha256.Size} {
			t.Errorf("HELLO %q: compared lengths %v, want one compare of two %d-byte digests", tt.secret, lens, sha256.Size)
		}
	}
}
