package commands

import (
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
	r.d = New(Options{Limiter: eng, Origin: eng, Host: noHost{}, Role: "origin", RequirePass: "pw", ClusterSecret: "cs",
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

// TestAuthThrottleConnection: five failures are checked; then attempts, the right password
// included, are refused unchecked for 100 ms, then 200 ms, ...; a success resets the count.
func TestAuthThrottleConnection(t *testing.T) {
	r := newThrottleRig()
	s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	steps := []struct {
		advance         time.Duration
		cmd             []string
		want            string
		failed, refused uint64
	}{
		{0, []string{"AUTH", "a"}, wrongPass, 1, 0},
		{0, []string{"AUTH", "default", "b"}, wrongPass, 2, 0},
		{0, []string{"HELLO", "3", "AUTH", "default", "c"}, wrongPass, 3, 0},
		{0, []string{"AUTH", "d"}, wrongPass, 4, 0},
		{0, []string{"AUTH", "e"}, wrongPass, 5, 0}, // the fifth: 100 ms of refusals
		{0, []string{"AUTH", "pw"}, wrongPass, 5, 1},
		{99 * time.Millisecond, []string{"HELLO", "3", "AUTH", "default", "pw"}, wrongPass, 5, 2},
		{time.Millisecond, []string{"AUTH", "f"}, wrongPass, 6, 2}, // checked: 200 ms now
		{199 * time.Millisecond, []string{"AUTH", "pw"}, wrongPass, 6, 3},
		{time.Millisecond, []string{"AUTH", "pw"}, "+OK\r\n", 6, 3},
		{0, []string{"AUTH", "g"}, wrongPass, 7, 3}, // counted afresh after the success
		{0, []string{"AUTH", "pw"}, "+OK\r\n", 7, 3},
	}
	for i, st := range steps {
		r.now = r.now.Add(st.advance)
		got := r.serve(s, st.cmd...)
		if !strings.HasPrefix(got, strings.TrimSuffix(st.want, "\r\n")) {
			t.Fatalf("step %d %v = %q, want %q", i, st.cmd, got, st.want)
		}
		if a := r.d.AuthStats(); a.Failures != st.failed || a.Throttled != st.refused {
			t.Fatalf("step %d %v: stats %+v, want failures %d throttled %d", i, st.cmd, a, st.failed, st.refused)
		}
	}
}

// TestAuthThrottleAddress: 20 failures from one address, over any connections, refuse its
// attempts; another address is unaffected; the cluster secret is throttled apart.
func TestAuthThrottleAddress(t *testing.T) {
	r := newThrottleRig()
	for i := range 20 {
		s := NewSession(int64(i), fmt.Sprintf("127.0.0.1:%d", 5000+i), "127.0.0.1:6380", 0)
		if got := r.serve(s, "AUTH", "x"); got != wrongPass {
			t.Fatalf("failure %d = %q", i, got)
		}
	}
	fresh := NewSession(100, "127.0.0.1:6000", "127.0.0.1:6380", 0)
	if got := r.serve(fresh, "AUTH", "pw"); got != wrongPass {
		t.Fatalf("right password from the throttled address = %q", got)
	}
	other := NewSession(101, "127.0.0.2:6000", "127.0.0.1:6380", 0)
	if got := r.serve(other, "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("right password from another address = %q", got)
	}
	if got := r.serve(fresh, "RL.INTERNAL.HELLO", "cs", "node/1"); got != "+OK\r\n" {
		t.Fatalf("cluster secret from an address throttled for passwords = %q", got)
	}
	r.now = r.now.Add(authBackoffMin)
	if got := r.serve(fresh, "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("right password after the backoff = %q", got)
	}
	if a := r.d.AuthStats(); a.Failures != 20 || a.Throttled != 1 {
		t.Fatalf("stats %+v", a)
	}
}

// TestAuthThrottleRate: 10,000 guesses over one connection within one second get fewer than
// 100 passwords checked, and the cluster secret likewise.
func TestAuthThrottleRate(t *testing.T) {
	for _, cmd := range [][]string{{"AUTH", "guess"}, {"RL.INTERNAL.HELLO", "guess", "n/1"}} {
		r := newThrottleRig()
		s := NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
		for range 10_000 {
			r.now = r.now.Add(100 * time.Microsecond)
			if got := r.serve(s, cmd...); !strings.HasPrefix(got, "-WRONGPASS") {
				t.Fatalf("%v = %q", cmd, got)
			}
		}
		a := r.d.AuthStats()
		if a.Failures >= 100 || a.Failures+a.Throttled != 10_000 {
			t.Fatalf("%v: %+v; want fewer than 100 checked of 10,000", cmd, a)
		}
		t.Logf("%v: %d checked, %d refused unchecked in 1 s", cmd[0], a.Failures, a.Throttled)
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
