package integration

// Throttled authentication, bounded client names, CLIENT TRACKING and INFO memory/keyspace
// with the real binary (README "Behaviour where the contract is silent").

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
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

// guess sends n wrong secrets over c, the command of each made by mk, pipelined in chunks,
// and checks every reply is WRONGPASS.
func guess(t *testing.T, c *rawConn, n int, mk func(secret string) []string) {
	t.Helper()
	const chunk = 500
	for sent := 0; sent < n; sent += chunk {
		var b []byte
		for i := range min(chunk, n-sent) {
			b = append(b, encode(mk("guess-secret-"+strconv.Itoa(sent+i))...)...)
		}
		c.write(b)
		for range min(chunk, n-sent) {
			if e := asError(t, c.read()); !strings.HasPrefix(e, "WRONGPASS") {
				t.Fatalf("guess: %q, want WRONGPASS", e)
			}
		}
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

// TestAuthThrottled: 10,000 wrong passwords over one connection get fewer than 100 checked
// per second; the right password from another address still works; INFO counts both;
// the log says so at most once per 10 s and never shows a password. The cluster secret
// likewise.
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
			c := dialRaw(t, p.Addr)
			start := time.Now()
			guess(t, c, 10_000, tc.mk)
			elapsed := time.Since(start)
			failed := statsField(t, admin, "auth_failures") - failed0
			throttled := statsField(t, admin, "auth_throttled") - throttled0
			t.Logf("%s: 10,000 guesses in %v: %d checked, %d refused unchecked", tc.name, elapsed, failed, throttled)
			if limit := int64(100*elapsed.Seconds()) + 25; failed >= limit || failed+throttled != 10_000 {
				t.Errorf("%d checked, %d refused in %v; want fewer than %d checked and 10,000 in all", failed, throttled, elapsed, limit)
			}
			// The right secret from the throttled connection is refused too (no oracle). It
			// goes in one write right after a wrong guess: whether that guess was refused
			// unchecked or checked (then starting a new backoff), the connection is
			// throttled when the right one is read, however slowly the guesses ran.
			right := tc.right
			c.write(append(encode(tc.mk("guess-secret-last")...), encode(right...)...))
			if e := asError(t, c.read()); !strings.HasPrefix(e, "WRONGPASS") {
				t.Errorf("last wrong guess: %q, want WRONGPASS", e)
			}
			if e := asError(t, c.read()); !strings.HasPrefix(e, "WRONGPASS") {
				t.Errorf("right secret from the throttled connection: %q, want WRONGPASS", e)
			}
			// ... and accepted from another address.
			other := dialFrom(t, "127.0.0.2", p.Addr)
			if v := other.do(right...); v != "OK" {
				t.Errorf("right secret from 127.0.0.2 = %#v", v)
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

// TestClientTrackingAndInfo: CLIENT TRACKING OFF and TRACKINGINFO answer as Redis (ON is
// refused: TestTrackingRefused); INFO memory has a real used_memory (redis-cli --stat
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

// TestRueidisClientSideCache: rueidis with its client-side cache off (with it on, the
// connection is refused: TestTrackingRefused) connects, decides, and runs a transaction.
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
