package integration

// Pub/sub: the same conversations with ratchet and a real redis-server, reply by reply
// (raw RESP2 and RESP3, go-redis, redis-cli), a subscriber that does not read cut at the
// bound, and edges refusing with the reason.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// convStep is one command of a conversation between several connections: conn sends args
// (-1: none; "$ID2" is connection 2's CLIENT ID), then one reply (or pushed message) is
// read from each connection of reads, in order.
type convStep struct {
	conn  int
	args  []string
	reads []int
	proto string // "2" or "3": the step runs in that protocol only; "": both
}

// pubsubConv: connection 0 subscribes to channels, 2 to patterns, 1 publishes.
var pubsubConv = []convStep{
	{conn: 0, args: []string{"UNSUBSCRIBE"}, reads: []int{0}},
	{conn: 0, args: []string{"PUNSUBSCRIBE"}, reads: []int{0}},
	{conn: 0, args: []string{"SUBSCRIBE", "a", "b", "a"}, reads: []int{0, 0, 0}},
	{conn: 0, args: []string{"PING"}, reads: []int{0}},
	{conn: 0, args: []string{"PING", "hi"}, reads: []int{0}},
	{conn: 0, args: []string{"GET", "k"}, reads: []int{0}},
	{conn: 0, args: []string{"PUBSUB", "NUMSUB", "a"}, reads: []int{0}},
	{conn: 0, args: []string{"CLIENT", "GETNAME"}, reads: []int{0}},
	{conn: 2, args: []string{"PSUBSCRIBE", "a*", "h?"}, reads: []int{2, 2}},
	{conn: 1, args: []string{"PUBLISH", "a", "m1"}, reads: []int{1, 0, 2}},
	{conn: 1, args: []string{"PUBLISH", "b", "m2"}, reads: []int{1, 0}},
	{conn: 1, args: []string{"PUBLISH", "hx", ""}, reads: []int{1, 2}},
	{conn: 1, args: []string{"PUBLISH", "abc", "m4"}, reads: []int{1, 2}},
	{conn: 1, args: []string{"PUBLISH", "nobody", "x"}, reads: []int{1}},
	{conn: 1, args: []string{"EVAL", "return redis.call('PUBLISH', ARGV[1], ARGV[2])", "0", "a", "lua"}, reads: []int{1, 0, 2}},
	{conn: 1, args: []string{"PUBSUB", "NUMSUB", "a", "b", "c"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBSUB", "NUMSUB"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBSUB", "NUMPAT"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBSUB", "CHANNELS", "a"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBSUB", "CHANNELS", "[b]"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBSUB", "FOO"}, reads: []int{1}},
	{conn: 1, args: []string{"PUBLISH", "a"}, reads: []int{1}},
	{conn: 1, args: []string{"SUBSCRIBE"}, reads: []int{1}},
	{conn: 0, args: []string{"UNSUBSCRIBE", "a"}, reads: []int{0}},
	{conn: 0, args: []string{"UNSUBSCRIBE", "b", "never"}, reads: []int{0, 0}},
	{conn: 0, args: []string{"PING"}, reads: []int{0}},
	{conn: 0, args: []string{"GET", "k"}, reads: []int{0}},
	{conn: 2, args: []string{"PUNSUBSCRIBE", "a*"}, reads: []int{2}},
	{conn: 2, args: []string{"PUNSUBSCRIBE"}, reads: []int{2}},
	{conn: 2, args: []string{"PUNSUBSCRIBE"}, reads: []int{2}},
	// A transaction that subscribes: EXEC's array holds the confirmation.
	{conn: 0, args: []string{"MULTI"}, reads: []int{0}},
	{conn: 0, args: []string{"SUBSCRIBE", "t"}, reads: []int{0}},
	{conn: 0, args: []string{"EXEC"}, reads: []int{0}},
	{conn: 1, args: []string{"PUBLISH", "t", "in-tx"}, reads: []int{1, 0}},
	// RESP3: a subscribed connection runs any command, and hears its own message first.
	{conn: 0, args: []string{"PUBLISH", "t", "self"}, reads: []int{0, 0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"PUBLISH", "t", "self"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"UNSUBSCRIBE"}, reads: []int{0}},
}

// runConversation plays steps on n connections to addr in RESP proto and returns every
// reply read, in order, as raw RESP.
func runConversation(t *testing.T, addr, proto string, n int, steps []convStep) []string {
	t.Helper()
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialProto(t, addr, proto)
	}
	id2 := ""
	if n > 2 {
		id2 = fmt.Sprint(conns[2].do("CLIENT", "ID"))
	}
	var out []string
	step := -1
	defer func() {
		if t.Failed() && step >= 0 {
			t.Logf("%s RESP%s: failed at step %d %q", addr, proto, step, steps[step].args)
		}
	}()
	for i, st := range steps {
		step = i
		if st.proto != "" && st.proto != proto {
			continue
		}
		if st.conn >= 0 {
			args := make([]string, len(st.args))
			for i, a := range st.args {
				args[i] = strings.ReplaceAll(a, "$ID2", id2)
			}
			conns[st.conn].send(args...)
		}
		for _, r := range st.reads {
			out = append(out, fmt.Sprintf("%q -> conn %d: %q", st.args, r, rawReply(t, conns[r])))
		}
	}
	return out
}

// TestPubSubMatchesRedisServer: pubsubConv gets the same bytes from ratchet as from
// redis-server, in RESP2 and RESP3.
func TestPubSubMatchesRedisServer(t *testing.T) {
	t.Parallel()
	compareConversation(t, pubsubConv)
}

// compareConversation plays steps on three connections to a redis-server and to ratchet,
// in RESP2 and RESP3, and compares every reply read. flags are given to both servers.
func compareConversation(t *testing.T, steps []convStep, flags ...string) {
	t.Helper()
	redisAddr := startRedisServer(t, flags...)
	p := start(t, append([]string{"--data-dir", ""}, flags...)...)
	for _, proto := range []string{"2", "3"} {
		want := runConversation(t, redisAddr, proto, 3, steps)
		got := runConversation(t, p.Addr, proto, 3, steps)
		for i := range want {
			if want[i] != got[i] {
				t.Errorf("RESP%s step %d:\n redis-server %s\n ratchet      %s", proto, i, want[i], got[i])
			}
		}
	}
}

// TestPubSubGoRedis: go-redis's PubSub (channels and patterns, RESP2 and RESP3) receives
// from ratchet what it receives from redis-server, and the publisher the same counts.
func TestPubSubGoRedis(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(addr string, proto int) []string {
		sub := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto})
		pub := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto})
		defer sub.Close()
		defer pub.Close()
		ps := sub.Subscribe(ctx, "news", "sport")
		defer ps.Close()
		if err := ps.PSubscribe(ctx, "n*"); err != nil {
			t.Fatalf("PSUBSCRIBE: %v", err)
		}
		var log []string
		for range 3 { // the confirmations
			m, err := ps.Receive(ctx)
			if err != nil {
				t.Fatalf("receive confirmation: %v", err)
			}
			log = append(log, fmt.Sprintf("%#v", m))
		}
		for _, msg := range [][2]string{{"news", "one"}, {"sport", "two"}, {"nope", "three"}, {"other", "lost"}} {
			n, err := pub.Publish(ctx, msg[0], msg[1]).Result()
			if err != nil {
				t.Fatalf("PUBLISH: %v", err)
			}
			log = append(log, fmt.Sprintf("PUBLISH %s = %d", msg[0], n))
		}
		for range 4 { // news twice (channel, pattern), sport, nope
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			log = append(log, fmt.Sprintf("%s %s %s", m.Pattern, m.Channel, m.Payload))
		}
		nums, err := pub.PubSubNumSub(ctx, "news", "none").Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		log = append(log, fmt.Sprint(nums))
		if err := ps.Unsubscribe(ctx, "news"); err != nil {
			t.Fatalf("UNSUBSCRIBE: %v", err)
		}
		n, err := pub.PubSubNumPat(ctx).Result()
		log = append(log, fmt.Sprint("NUMPAT ", n, err))
		return log
	}
	for _, proto := range []int{2, 3} {
		want, got := run(redisAddr, proto), run(p.Addr, proto)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("RESP%d go-redis PubSub:\n redis-server %q\n ratchet      %q", proto, want, got)
		}
	}
}

// TestPubSubRedisCLI: redis-cli SUBSCRIBE (RESP2 and -3) prints the same lines for ratchet
// as for redis-server.
func TestPubSubRedisCLI(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli", "apt-get install -y redis-tools")
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	run := func(addr string, resp3 bool) string {
		host, port, _ := strings.Cut(addr, ":")
		args := []string{"-h", host, "-p", port}
		if resp3 {
			args = append(args, "-3")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append(args, "SUBSCRIBE", "cli-chan")...)
		var out lockedBuffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-cli: %v", err)
		}
		pub := redis.NewClient(&redis.Options{Addr: addr})
		defer pub.Close()
		testwait.UntilTrue(t, 30*time.Second, "redis-cli to subscribe", func() bool {
			n, err := pub.PubSubNumSub(ctx, "cli-chan").Result()
			return err == nil && n["cli-chan"] == 1
		})
		for _, m := range []string{"hello", "world"} {
			if err := pub.Publish(ctx, "cli-chan", m).Err(); err != nil {
				t.Fatalf("PUBLISH: %v", err)
			}
		}
		testwait.UntilTrue(t, 30*time.Second, "redis-cli to print both messages", func() bool {
			return strings.Count(out.String(), "world") == 1
		})
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return out.String()
	}
	for _, resp3 := range []bool{false, true} {
		if want, got := run(redisAddr, resp3), run(p.Addr, resp3); want != got {
			t.Errorf("redis-cli SUBSCRIBE (RESP3 %v):\n redis-server %q\n ratchet      %q", resp3, want, got)
		}
	}
}

// lockedBuffer is a bytes.Buffer that a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPubSubSlowSubscriberCut: a subscriber that never reads is closed once the messages
// waiting for it pass --pubsub-output-limit's hard bound (its subscription then goes), as
// redis-server closes it at client-output-buffer-limit pubsub; a subscriber that reads
// keeps receiving (the publisher waits for it). Ratchet runs with its event loops and with a goroutine per connection.
func TestPubSubSlowSubscriberCut(t *testing.T) {
	t.Parallel()
	targets := map[string]string{
		"redis-server":      startRedisServer(t, "--client-output-buffer-limit", "pubsub 4mb 0 0"),
		"ratchet":           start(t, "--data-dir", "", "--pubsub-output-limit", "4mb 0 0").Addr,
		"ratchet-goroutine": start(t, "--data-dir", "", "--pubsub-output-limit", "4mb 0 0", "--event-loops", "-1").Addr,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	for name, addr := range targets {
		slow := dialRaw(t, addr)
		slow.send("SUBSCRIBE", "firehose")
		rawReply(t, slow) // then it reads nothing more
		reader := redis.NewClient(&redis.Options{Addr: addr})
		ps := reader.Subscribe(ctx, "firehose")
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("%s: subscribe: %v", name, err)
		}
		var received atomic.Int64
		go func() {
			for {
				if _, err := ps.ReceiveMessage(ctx); err != nil {
					return
				}
				received.Add(1)
			}
		}()
		pub := redis.NewClient(&redis.Options{Addr: addr})
		msg := strings.Repeat("x", 64<<10)
		published := int64(0)
		// 64 KiB messages until the slow subscriber is gone: at most 512 MiB, far past
		// the 4 MiB bound and any socket buffers.
		for n := int64(2); n == 2; {
			if published == 8192 {
				t.Fatalf("%s: the subscriber that does not read was never cut", name)
			}
			// The reading subscriber stays within 8 messages (512 KiB) of the publisher.
			testwait.UntilTrue(t, 60*time.Second, name+": the reading subscriber to keep up", func() bool {
				return received.Load() >= published-8
			})
			var err error
			if n, err = pub.Publish(ctx, "firehose", msg).Result(); err != nil {
				t.Fatalf("%s: PUBLISH: %v", name, err)
			}
			published++
		}
		testwait.UntilTrue(t, 60*time.Second, name+": the reading subscriber to receive every message", func() bool {
			return received.Load() >= published
		})
		_ = ps.Close()
		_ = reader.Close()
		_ = pub.Close()
		slow.expectClosedAfterData()
	}
}

// expectClosedAfterData reads whatever the server sent until it closes the connection
// (within 30 s).
func (c *rawConn) expectClosedAfterData() {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.r.Read(buf); err != nil {
			if isTimeout(err) {
				c.t.Fatalf("the connection of the subscriber that did not read is still open")
			}
			return
		}
	}
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	te, ok := err.(timeout)
	return ok && te.Timeout()
}

// TestPubSubOnEdge: an edge refuses pub/sub with the reason, never answering as if no one
// listened.
func TestPubSubOnEdge(t *testing.T) {
	t.Parallel()
	targets := multiTargets(t)
	c := dialRaw(t, targets["edge"].Addr)
	for _, args := range [][]string{{"SUBSCRIBE", "a"}, {"PSUBSCRIBE", "a*"}, {"PUBLISH", "a", "m"}, {"PUBSUB", "NUMSUB", "a"},
		{"UNSUBSCRIBE"}, {"CLIENT", "TRACKING", "ON"}} {
		msg := asError(t, c.do(args...))
		if !strings.Contains(msg, "served by the origin only") {
			t.Errorf("edge %q = %q, want a refusal saying the origin serves it", args, msg)
		}
	}
	c.expectPong()
}

// TestPubSubACLChannels: a user of an ACL file may publish and subscribe only to the
// channels its &patterns allow (PSUBSCRIBE: a pattern named literally), with redis-server's
// replies; a user without channel rules (resetchannels, Redis 7's default) may use none.
func TestPubSubACLChannels(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "users.acl")
	rules := "user default on nopass ~* &* +@all\nuser news on >pw ~* &news* +@all\nuser none on >pw ~* +@all\n"
	if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []convStep{
		{conn: 0, args: []string{"AUTH", "news", "pw"}, reads: []int{0}},
		{conn: 0, args: []string{"PUBLISH", "other", "m"}, reads: []int{0}},
		{conn: 0, args: []string{"PUBLISH", "newsx", "m"}, reads: []int{0}},
		{conn: 0, args: []string{"SUBSCRIBE", "newsy", "other"}, reads: []int{0}},
		{conn: 0, args: []string{"PSUBSCRIBE", "news"}, reads: []int{0}},
		{conn: 0, args: []string{"PSUBSCRIBE", "news*"}, reads: []int{0}},
		{conn: 0, args: []string{"UNSUBSCRIBE", "other"}, reads: []int{0}},
		{conn: 1, args: []string{"AUTH", "none", "pw"}, reads: []int{1}},
		{conn: 1, args: []string{"PUBLISH", "news", "m"}, reads: []int{1}},
		{conn: 1, args: []string{"SUBSCRIBE", "news"}, reads: []int{1}},
	}
	compareConversation(t, steps, "--aclfile", file)
}

// TestPubSubWhileScripting: a RESP3 subscriber that runs scripts on the interpreter (each
// moves its connection from its event loop to a goroutine and back) gets every message,
// in order, and every script's reply, in order, none inside another, while another
// connection publishes.
func TestPubSubWhileScripting(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "")
	sub := dialProto(t, p.Addr, "3")
	sub.send("SUBSCRIBE", "ch")
	if got := rawReply(t, sub); got != ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	const messages, scripts = 2000, 200
	pub := dialRaw(t, p.Addr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range messages {
			pub.write(encode("PUBLISH", "ch", fmt.Sprint("m", i)))
		}
	}()
	for i := range scripts {
		sub.send("EVAL", fmt.Sprintf("return redis.call('INCR', KEYS[1]) * 0 + %d", i), "1", "scripting-sub")
	}
	<-done
	nextMsg, nextReply := 0, 0
	for nextMsg < messages || nextReply < scripts {
		got := rawReply(t, sub)
		switch {
		case strings.HasPrefix(got, ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n"):
			if want := fmt.Sprint("m", nextMsg); !strings.HasSuffix(got, "\r\n"+want+"\r\n") {
				t.Fatalf("message %d: %q", nextMsg, got)
			}
			nextMsg++
		case got == fmt.Sprintf(":%d\r\n", nextReply):
			nextReply++
		default:
			t.Fatalf("after %d messages and %d replies: %q", nextMsg, nextReply, got)
		}
	}
}
