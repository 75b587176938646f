package integration

// Throttled authentication, bounded client names, CLIENT TRACKING and INFO memory/keyspace
// with the real binary (README "Behaviour where the contract is silent").

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/ratchet/ratchet/internal/testwait"
)

// dialFrom connects to addr from the loopback address local (127.0.0.2: another source
// address for the server's per-address throttle).
func dialFrom(t testing.TB, local, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// guessUntilClosed sends wrong secrets over c one at a time, the command of each made by
// mk, until the server closes the connection; it checks every reply is WRONGPASS and
// returns their number. It fails when max replies come without the connection closing.
func guessUntilClosed(t *testing.T, c *rawConn, max int, mk func(secret string) []string) int {
	t.Helper()
	for n := 0; n < max; n++ {
		if _, err := c.Write(encode(mk("guess-secret-" + strconv.Itoa(n))...)); err != nil {
			return n
		}
		v, err := c.tryRead(10 * time.Second)
		if err != nil {
			return n
		}
		if e := asError(t, v); !strings.HasPrefix(e, "WRONGPASS") {
			t.Fatalf("guess %d: %q, want WRONGPASS", n, e)
		}
	}
	t.Fatalf("%d wrong guesses and the connection is still open", max)
	return max
}

// wrongFlood sends wrong commands made by mk to addr, each over a fresh connection from
// 127.0.0.1, until stop is closed; it counts the WRONGPASS replies in n.
func wrongFlood(addr string, stop <-chan struct{}, n *atomic.Int64, mk func(secret string) []string) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		if _, err := c.Write(encode(mk("flood-secret-" + strconv.Itoa(i))...)); err == nil {
			if v, err := readValue(r); err == nil {
				if e, ok := v.(respError); ok && strings.HasPrefix(string(e), "WRONGPASS") {
					n.Add(1)
				}
			}
		}
		_ = c.Close()
	}
}

// statsField reads one field of INFO stats over c.
func statsField(t testing.TB, c *rawConn, field string) int64 {
	t.Helper()
	text, ok := c.do("INFO", "stats").(string)
	if !ok {
		t.Fatalf("INFO stats is not a string")
	}
	v, err := strconv.ParseInt(infoFields(text)[field], 10, 64)
	if err != nil {
		t.Fatalf("INFO stats %s: %v\n%s", field, err, text)
	}
	return v
}

// TestAuthThrottled: wrong passwords over one connection get it closed after a few
// failures, so guesses cannot be pipelined; the right password from the same address is
// accepted at once; INFO counts both; the log says so at most once per 10 s and never
// shows a password. The cluster secret likewise.
func TestAuthThrottled(t *testing.T) {
	t.Parallel()
	p := start(t, "--requirepass", "s3cret", "--cluster-secret", "cluster-s3cret", "--data-dir", "")
	for _, tc := range []struct {
		name  string
		mk    func(secret string) []string
		right []string
	}{
		{"AUTH", func(s string) []string { return []string{"AUTH", s} }, []string{"AUTH", "s3cret"}},
		{"HELLO AUTH", func(s string) []string { return []string{"HELLO", "3", "AUTH", "default", s} }, []string{"AUTH", "s3cret"}},
		{"cluster secret", func(s string) []string { return []string{"RL.INTERNAL.HELLO", s, "node/1"} },
			[]string{"RL.INTERNAL.HELLO", "cluster-s3cret", "node/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := dialFrom(t, "127.0.0.2", p.Addr)
			if v := admin.do("AUTH", "s3cret"); v != "OK" {
				t.Fatalf("AUTH from 127.0.0.2 = %#v", v)
			}
			failed0, throttled0 := statsField(t, admin, "auth_failures"), statsField(t, admin, "auth_throttled")
			answered := 0
			for range 5 { // five connections: the address's budget is spent too
				answered += guessUntilClosed(t, dialRaw(t, p.Addr), 1000, tc.mk)
			}
			failed := statsField(t, admin, "auth_failures") - failed0
			throttled := statsField(t, admin, "auth_throttled") - throttled0
			t.Logf("%s: %d guesses answered over 5 connections: %d failures, %d throttled", tc.name, answered, failed, throttled)
			if throttled < 5 || failed+throttled != int64(answered) {
				t.Errorf("%d failures, %d throttled of %d answered; want each connection closed throttled", failed, throttled, answered)
			}
			// The right secret from the throttled address is accepted.
			if v := dialRaw(t, p.Addr).do(tc.right...); v != "OK" {
				t.Errorf("right secret from the throttled address = %#v", v)
			}
		})
	}
	log := p.Log()
	if n := strings.Count(log, "authentication failed"); n < 1 || n > 4 {
		t.Errorf("%d log lines about failed authentication, want 1 to 4 (one per 10 s per kind):\n%s", n, log)
	}
	if strings.Contains(log, "guess-secret") {
		t.Errorf("the log shows a guessed secret:\n%s", log)
	}
}

// TestAuthFloodRightPassword: during a flood of wrong AUTH from 127.0.0.1, the right
// password from the same address is accepted every time (issue 20: it was refused 41 of
// 42 times).
func TestAuthFloodRightPassword(t *testing.T) {
	t.Parallel()
	p := start(t, "--requirepass", "s3cret", "--data-dir", "")
	stop := make(chan struct{})
	var wrong atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		wrongFlood(p.Addr, stop, &wrong, func(s string) []string { return []string{"AUTH", s} })
	}()
	defer func() { close(stop); <-done }()
	testwait.Until(t, 30*time.Second, "100 wrong passwords", func() (bool, string) {
		return wrong.Load() >= 100, strconv.FormatInt(wrong.Load(), 10)
	})
	for i := range 50 {
		c := dialRaw(t, p.Addr)
		if v := c.do("AUTH", "s3cret"); v != "OK" {
			t.Fatalf("right password %d, after %d wrong ones = %#v", i, wrong.Load(), v)
		}
		_ = c.Close()
	}
	admin := dialRaw(t, p.Addr)
	admin.do("AUTH", "s3cret")
	t.Logf("%d wrong passwords sent; auth_failures %d, auth_throttled %d", wrong.Load(),
		statsField(t, admin, "auth_failures"), statsField(t, admin, "auth_throttled"))
}

// TestEdgeStartsUnderHelloFlood reproduces failure 1 of issue 20: wrong RL.INTERNAL.HELLO
// from the edge's address, on fresh connections, while the edge starts. The edge with the
// right secret reaches its origin (/readyz 200) during the attack.
func TestEdgeStartsUnderHelloFlood(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	stop := make(chan struct{})
	var wrong atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		wrongFlood(origin.Addr, stop, &wrong, func(s string) []string { return []string{"RL.INTERNAL.HELLO", s, "attacker/1"} })
	}()
	defer func() { close(stop); <-done }()
	testwait.Until(t, 30*time.Second, "100 wrong cluster secrets", func() (bool, string) {
		return wrong.Load() >= 100, strconv.FormatInt(wrong.Load(), 10)
	})
	edge := startEdge(t, []*proc{origin})
	testwait.Until(t, 30*time.Second, "the edge ready during the flood", func() (bool, string) {
		c, body := readyz(t, edge)
		return c == http.StatusOK, fmt.Sprintf("%d %q", c, body)
	})
	if info := ratchetInfo(t, edge.client(t, nil)); info["origins_reachable"] != "1" {
		t.Errorf("edge INFO ratchet origins_reachable = %q, want 1", info["origins_reachable"])
	}
	t.Logf("%d wrong cluster secrets sent in all", wrong.Load())
}

// TestClientNamesBounded: a 257-byte client name is refused, so CLIENT LIST stays small.
func TestClientNamesBounded(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "")
	c := dialRaw(t, p.Addr)
	if v := c.do("CLIENT", "SETNAME", strings.Repeat("n", 256)); v != "OK" {
		t.Fatalf("256-byte name = %#v", v)
	}
	for _, args := range [][]string{{"CLIENT", "SETNAME", strings.Repeat("n", 64<<10)},
		{"HELLO", "3", "SETNAME", strings.Repeat("n", 257)}, {"CLIENT", "SETINFO", "LIB-NAME", strings.Repeat("n", 257)}} {
		if e := asError(t, c.do(args...)); !strings.Contains(e, "256 bytes") {
			t.Errorf("%s %s of %d bytes: %q", args[0], args[1], len(args[len(args)-1]), e)
		}
	}
	if list, _ := c.do("CLIENT", "LIST").(string); len(list) > 2000 {
		t.Errorf("CLIENT LIST of one client is %d bytes", len(list))
	}
}

// TestClientTrackingAndInfo: CLIENT TRACKING OFF and TRACKINGINFO answer as Redis (ON:
// tracking_test.go); INFO memory has a real used_memory (redis-cli --stat
// reads it) and INFO keyspace db0's cells.
func TestClientTrackingAndInfo(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "")
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := p.client(t, &redis.Options{Protocol: proto, PoolSize: 1})
		for _, args := range [][]any{{"CLIENT", "TRACKING", "OFF"}, {"CLIENT", "TRACKING", "OFF", "BCAST"}} {
			if err := c.Do(ctx, args...).Err(); err != nil {
				t.Errorf("RESP%d %v: %v", proto, args, err)
			}
		}
		if _, err := c.Do(ctx, "CLIENT", "TRACKINGINFO").Result(); err != nil {
			t.Errorf("RESP%d CLIENT TRACKINGINFO: %v", proto, err)
		}
	}
	c := p.client(t, nil)
	limitReply(t, c, "a", 5, "1h")
	limitReply(t, c, "b", 5, "1h")
	mem := infoFields(c.Info(ctx, "memory").Val())
	for _, f := range []string{"used_memory", "used_memory_rss", "maxmemory"} {
		if n, err := strconv.ParseInt(mem[f], 10, 64); err != nil || n <= 0 {
			t.Errorf("INFO memory %s = %q, want a positive integer", f, mem[f])
		}
	}
	if db0 := infoFields(c.Info(ctx, "keyspace").Val())["db0"]; db0 != "keys=2,expires=0,avg_ttl=0" {
		t.Errorf("INFO keyspace db0 = %q", db0)
	}
	if all := c.Info(ctx).Val(); !strings.Contains(all, "# Memory") || !strings.Contains(all, "# Keyspace") {
		t.Errorf("INFO without a section lacks Memory or Keyspace")
	}
}

// TestRueidisClientSideCache: rueidis with its client-side cache off (as against an edge,
// which refuses tracking; with it on: TestTrackingRueidisDoCache) connects, decides, and
// runs a transaction.
func TestRueidisClientSideCache(t *testing.T) {
	t.Parallel()
	p := start(t, "--requirepass", "s3cret", "--data-dir", "")
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr}, Password: "s3cret",
		DisableCache: true, DisableRetry: true, Dialer: net.Dialer{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatalf("rueidis.NewClient without client-side caching: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	limit := func(cmds ...rueidis.Completed) []rueidis.RedisResult { return c.DoMulti(ctx, cmds...) }
	rl := func() rueidis.Completed { return c.B().Arbitrary("RL.LIMIT").Keys("rueidis").Args("5", "1h").Build() }
	r, err := c.Do(ctx, rl()).AsIntSlice()
	if err != nil || len(r) != 5 || r[0] != 1 || r[2] != 4 {
		t.Fatalf("RL.LIMIT through rueidis = %v, %v", r, err)
	}
	// A transaction: MULTI, two RL.LIMIT, EXEC in one round trip.
	res := limit(c.B().Multi().Build(), rl(), rl(), c.B().Exec().Build())
	exec, err := res[3].ToArray()
	if err != nil || len(exec) != 2 {
		t.Fatalf("EXEC through rueidis = %v, %v", exec, err)
	}
	if r, err := exec[1].AsIntSlice(); err != nil || r[2] != 2 {
		t.Fatalf("second RL.LIMIT in EXEC = %v, %v; want remaining 2", r, err)
	}
}
