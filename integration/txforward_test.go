package integration

// A transaction of counter commands on an edge runs whole on the origin: EXEC answers an
// array whatever the number of commands, on every role, byte for byte as redis-server
// (README "Transactions").

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// waitForwarding waits until the edge at addr forwards to its origin: its link may still
// be connecting when it first answers PING.
func waitForwarding(t testing.TB, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	testwait.Until(t, 30*time.Second, "the edge "+addr+" to forward", func() (bool, string) {
		v := c.do("GET", "forwarding-probe")
		e, ok := v.(respError)
		return !ok || !strings.HasPrefix(string(e), "TRYAGAIN"), fmt.Sprintf("it answers %v", v)
	})
}

// TestTxOfOneCommandIsAnArray: go-redis TxPipelined of one INCR, through an edge and on its
// origin, in RESP2 and RESP3, gets the INCR's value (a bare ":2" instead of "*1 :2" made
// go-redis fail).
func TestTxOfOneCommandIsAnArray(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	targets := multiTargets(t)
	waitForwarding(t, targets["edge"].Addr)
	for name, p := range targets {
		for _, proto := range []int{2, 3} {
			c := p.client(t, &redis.Options{Protocol: proto})
			key := fmt.Sprintf("tx1-%s-%d", name, proto)
			for want := int64(1); want <= 2; want++ {
				var incr *redis.IntCmd
				cmds, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
					incr = pipe.Incr(ctx, key)
					return nil
				})
				if err != nil || len(cmds) != 1 || incr.Val() != want {
					t.Fatalf("%s RESP%d: TxPipelined(INCR) = %d, %v (%d cmds), want %d", name, proto, incr.Val(), err, len(cmds), want)
				}
			}
		}
	}
}

// TestTxRepliesMatchRedisServer: MULTI with zero, one and two counter commands (and one
// of a queue-time error) on an edge and on its origin answer the bytes redis-server
// answers, in RESP2 and RESP3.
func TestTxRepliesMatchRedisServer(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t)
	script := []string{
		"MULTI", "EXEC",
		"MULTI", "INCR c", "EXEC",
		"MULTI", "INCR c", "GET c", "EXEC",
		"MULTI", "GET nokey", "EXEC",
		"MULTI", "INCRBY c x", "EXEC",
		"MULTI", "GET", "EXEC",
		"DEL c",
	}
	targets := multiTargets(t)
	waitForwarding(t, targets["edge"].Addr)
	for name, p := range targets {
		for _, proto := range []string{"2", "3"} {
			rc, rt := dialRaw(t, redisAddr), dialRaw(t, p.Addr)
			for _, c := range []*rawConn{rc, rt} {
				c.send("HELLO", proto)
				rawReply(t, c)
			}
			for _, line := range script {
				args := strings.Fields(line)
				rc.send(args...)
				rt.send(args...)
				if want, got := rawReply(t, rc), rawReply(t, rt); want != got {
					t.Errorf("%s RESP%s %s:\n redis-server %q\n ratchet      %q", name, proto, line, want, got)
				}
			}
		}
	}
}

// TestTxRedisCLI: redis-cli shows a one-command transaction through an edge as an array
// of one, as it shows redis-server's.
func TestTxRedisCLI(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli", installRedisTools)
	redisAddr := startRedisServer(t)
	targets := multiTargets(t)
	waitForwarding(t, targets["edge"].Addr)
	run := func(addr string) string {
		host, port, _ := net.SplitHostPort(addr)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "--no-raw")
		cmd.Stdin = strings.NewReader("MULTI\nINCR c\nEXEC\nMULTI\nEXEC\nDEL c\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli against %s: %v\n%s", addr, err, out)
		}
		return string(out)
	}
	want := run(redisAddr)
	if !strings.Contains(want, "1) (integer) 1\n") {
		t.Fatalf("redis-server through redis-cli: %q", want)
	}
	if got := run(targets["edge"].Addr); got != want {
		t.Errorf("redis-cli through an edge:\n%s\nredis-server:\n%s", got, want)
	}
}
