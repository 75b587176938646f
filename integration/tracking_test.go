package integration

// CLIENT TRACKING: ratchet and a real redis-server answer the same tracking conversations
// reply by reply and push by push, and the client-side caches of rueidis (DoCache, with its
// defaults) and node-redis (clientSideCache) read another client's write instead of their
// cached value, as with redis-server.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// trackingConv: connection 0 tracks, 1 writes, 2 is the REDIRECT target (RESP2: it
// subscribes to __redis__:invalidate). conn -1 sends nothing: the step only reads.
var trackingConv = []convStep{
	// Default mode: a key read is invalidated once, at the next write by anyone.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"EXISTS", "k2", "k1"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "k1", "a"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"SET", "k1", "b"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"INCR", "k2"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"PTTL", "k2"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"EXPIRE", "k2", "100"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"TTL", "k2"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"DEL", "k2", "k1"}, reads: []int{1, 0}, proto: "3"},
	// The data types' reads and writes.
	{conn: 0, args: []string{"HGET", "h1", "f"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"LRANGE", "l1", "0", "-1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"SMEMBERS", "s1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"ZRANGE", "z1", "0", "-1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"MGET", "m1", "m2"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"HSET", "h1", "f", "v"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"LPUSH", "l1", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"SADD", "s1", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"ZADD", "z1", "1", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"MSET", "m1", "1", "m2", "2"}, reads: []int{1, 0, 0}, proto: "3"},
	{conn: 0, args: []string{"HGETALL", "h1"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"HINCRBY", "h1", "n", "1"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k3"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k3", "v"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k3"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"MULTI"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"INCR", "k4"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"SET", "k3", "w"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"EXEC"}, reads: []int{1, 0}, proto: "3"},
	// Its own write: the invalidation follows the reply.
	{conn: 0, args: []string{"GET", "k3"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"SET", "k3", "x"}, reads: []int{0, 0}, proto: "3"},
	{conn: 0, args: []string{"PING"}, reads: []int{0}, proto: "3"},
	// NOLOOP: not its own writes.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "NOLOOP"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k3"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"SET", "k3", "y"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "k3"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "k3", "z"}, reads: []int{1, 0}, proto: "3"},
	// OPTIN: only after CLIENT CACHING yes, for one command or a whole transaction, the
	// way rueidis's DoCache reads (CACHING yes, MULTI, PTTL, GET, EXEC).
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "OPTIN"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "o1"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "o1", "1"}, reads: []int{1}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "CACHING", "YES"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"MULTI"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"PTTL", "o1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "o1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"EXEC"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "o2"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "o2", "1"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"SET", "o1", "2"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "CACHING", "YES"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"NOSUCHCOMMAND"}, reads: []int{0}, proto: "3"}, // uses up CACHING yes
	{conn: 0, args: []string{"GET", "o3"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "o3", "1"}, reads: []int{1}, proto: "3"},
	{conn: 0, args: []string{"PING"}, reads: []int{0}, proto: "3"},
	// A key read with a TTL is invalidated when it expires.
	{conn: 1, args: []string{"SET", "e1", "v", "PX", "2000"}, reads: []int{1}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "CACHING", "YES"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "e1"}, reads: []int{0}, proto: "3"},
	{conn: -1, reads: []int{0}, proto: "3"},
	// OPTOUT: all but after CLIENT CACHING no.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "OPTOUT"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "CACHING", "NO"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "u1"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "u2"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "u1", "1"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"SET", "u2", "1"}, reads: []int{1, 0}, proto: "3"},
	// BCAST with prefixes: every write under them, read or not.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:", "PREFIX", "q:"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"SET", "p:1", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"SET", "other", "x"}, reads: []int{1}, proto: "3"},
	{conn: 1, args: []string{"SET", "q:1", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"DEL", "q:1", "other"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"SET", "q:3", "x"}, reads: []int{0, 0}, proto: "3"},
	{conn: 1, args: []string{"SET", "b:1", "x", "PX", "2000"}, reads: []int{1}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b:"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "b:1"}, reads: []int{0}, proto: "3"},
	{conn: -1, reads: []int{0}, proto: "3"}, // b:1 expired
	{conn: 1, args: []string{"SET", "b:2", "x"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"PING"}, reads: []int{0}, proto: "3"},
	// A flush: every tracking connection gets a null invalidation, its own after its reply.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"GET", "f1"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"FLUSHALL"}, reads: []int{1, 0}, proto: "3"},
	{conn: 1, args: []string{"SET", "f1", "x"}, reads: []int{1}, proto: "3"},
	{conn: 0, args: []string{"FLUSHDB", "ASYNC"}, reads: []int{0, 0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "3"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:"}, reads: []int{0}, proto: "3"},
	{conn: 1, args: []string{"FLUSHALL"}, reads: []int{1, 0}, proto: "3"},
	{conn: 0, args: []string{"PING"}, reads: []int{0}, proto: "3"},

	// RESP2: invalidations go to a connection subscribed to __redis__:invalidate.
	{conn: 2, args: []string{"SUBSCRIBE", "__redis__:invalidate"}, reads: []int{2}, proto: "2"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "REDIRECT", "$ID2"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"GET", "r1"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"EXISTS", "r2"}, reads: []int{0}, proto: "2"},
	{conn: 1, args: []string{"SET", "r1", "x"}, reads: []int{1, 2}, proto: "2"},
	{conn: 0, args: []string{"SET", "r1", "y"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"GET", "r1"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"SET", "r1", "z"}, reads: []int{0, 2}, proto: "2"},
	{conn: 1, args: []string{"FLUSHALL"}, reads: []int{1, 2}, proto: "2"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "$ID2"}, reads: []int{0}, proto: "2"},
	{conn: 1, args: []string{"INCR", "r3"}, reads: []int{1, 2}, proto: "2"},
	{conn: 2, args: []string{"PING"}, reads: []int{2}, proto: "2"},
	// Without a redirect, a RESP2 connection is sent nothing.
	{conn: 0, args: []string{"CLIENT", "TRACKING", "OFF"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"CLIENT", "TRACKING", "ON"}, reads: []int{0}, proto: "2"},
	{conn: 0, args: []string{"GET", "r4"}, reads: []int{0}, proto: "2"},
	{conn: 1, args: []string{"SET", "r4", "x"}, reads: []int{1}, proto: "2"},
	{conn: 0, args: []string{"PING"}, reads: []int{0}, proto: "2"},
	{conn: 2, args: []string{"PING"}, reads: []int{2}, proto: "2"},
}

// TestTrackingMatchesRedisServer: trackingConv gets the same bytes from ratchet as from
// redis-server (RESP3 pushes; RESP2 through a redirect), connection by connection.
func TestTrackingMatchesRedisServer(t *testing.T) {
	t.Parallel()
	compareConversation(t, trackingConv)
}

// TestTrackingRueidisDoCache: rueidis with its defaults (client-side cache on: CLIENT
// TRACKING ON OPTIN, DoCache as CACHING yes + MULTI PTTL GET EXEC) reads every write of
// another client (SET, INCR, a script, a transaction, DEL, EXPIRE) instead of its cached
// value, and serves the reads in between from its cache: on ratchet as on redis-server.
// Without invalidations it would read its first value for the minute DoCache keeps it.
func TestTrackingRueidisDoCache(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	targets := map[string]string{"redis-server": startRedisServer(t), "ratchet": start(t, "--data-dir", "").Addr}
	for name, addr := range targets {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableRetry: true,
			Dialer: net.Dialer{Timeout: 5 * time.Second}})
		if err != nil {
			t.Fatalf("%s: rueidis with its client-side cache: %v", name, err)
		}
		w := redis.NewClient(&redis.Options{Addr: addr})
		key := "cached-" + name
		writes := []func(want int) error{
			func(want int) error { return w.Set(ctx, key, want, 0).Err() },
			func(int) error { return w.Incr(ctx, key).Err() },
			func(want int) error {
				return w.Eval(ctx, "return redis.call('SET', KEYS[1], ARGV[1])", []string{key}, want).Err()
			},
			func(want int) error {
				_, err := w.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, key, want-1, 0)
					p.Incr(ctx, key)
					return nil
				})
				return err
			},
		}
		hits := 0
		for want := 1; want <= 12; want++ {
			if err := writes[want%len(writes)](want); err != nil {
				t.Fatalf("%s: write %d: %v", name, want, err)
			}
			read := func() (int64, bool) {
				r := c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute)
				v, err := r.AsInt64()
				if err != nil {
					t.Fatalf("%s: DoCache GET: %v", name, err)
				}
				return v, r.IsCacheHit()
			}
			deadline := time.Now().Add(20 * time.Second)
			for v, _ := read(); v != int64(want); v, _ = read() {
				if time.Now().After(deadline) {
					t.Fatalf("%s: DoCache GET still reads %d 20 s after another client wrote %d", name, v, want)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for range 2 {
				v, hit := read()
				if v != int64(want) {
					t.Fatalf("%s: DoCache GET = %d after reading %d", name, v, want)
				}
				if hit {
					hits++
				}
			}
		}
		// DEL and EXPIRE invalidate too.
		if err := w.Expire(ctx, key, 300*time.Millisecond).Err(); err != nil {
			t.Fatalf("%s: EXPIRE: %v", name, err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !rueidis.IsRedisNil(c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute).Error()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: DoCache GET still reads the key 20 s after it expired", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if hits == 0 {
			t.Errorf("%s: no DoCache read was served from rueidis's cache", name)
		}
		c.Close()
		_ = w.Close()
	}
}

// TestTrackingNodeRedisClientSideCache: node-redis 5 with clientSideCache (RESP3, CLIENT
// TRACKING ON) reads another client's write instead of its cached value, round after
// round, and serves the reads in between from its cache: on ratchet as on redis-server.
func TestTrackingNodeRedisClientSideCache(t *testing.T) {
	t.Parallel()
	node := nodeWithClients(t, "redis")
	targets := map[string]string{"redis-server": startRedisServer(t), "ratchet": start(t, "--data-dir", "").Addr}
	for name, addr := range targets {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		cmd := exec.CommandContext(ctx, node, filepath.Join(clientsDir(t), "tracking", "node-redis-csc.js"), addr, "csc", "20")
		cmd.Dir = clientsDir(t)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: node-redis clientSideCache: %v\n%s", name, err, out)
		}
		var res struct{ Rounds, Hits, Misses, StaleReads int }
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("%s: node-redis printed %q: %v", name, out, err)
		}
		if res.Rounds != 20 || res.Hits < 2*res.Rounds {
			t.Errorf("%s: node-redis clientSideCache: %+v, want 20 rounds each with two reads from the cache", name, res)
		}
		t.Logf("%s: %s", name, fmt.Sprint(res))
	}
}

// TestTrackingTableBound: with --tracking-table-max-keys 2, remembering a third key
// forgets one of the first two and invalidates it at once (Redis's tracking-table-max-keys).
func TestTrackingTableBound(t *testing.T) {
	t.Parallel()
	p := start(t, "--data-dir", "", "--tracking-table-max-keys", "2")
	c := dialProto(t, p.Addr, "3")
	w := dialRaw(t, p.Addr)
	c.do("CLIENT", "TRACKING", "ON")
	c.do("GET", "a")
	c.do("GET", "b")
	c.send("GET", "c")
	got := []string{rawReply(t, c), rawReply(t, c)}
	evicted := ""
	for _, k := range []string{"a", "b"} {
		if got[1] == ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\n"+k+"\r\n" {
			evicted = k
		}
	}
	if got[0] != "_\r\n" || evicted == "" {
		t.Fatalf("GET c past the bound: %q, want its null then the invalidation of a or b", got)
	}
	kept := map[string]string{"a": "b", "b": "a"}[evicted]
	w.do("SET", evicted, "1") // forgotten: no second invalidation
	w.do("SET", kept, "1")
	if v := rawReply(t, c); v != ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\n"+kept+"\r\n" {
		t.Fatalf("after writes of %s and %s: %q, want the invalidation of %s only", evicted, kept, v, kept)
	}
	c.expectPong()
}

// TestTrackingWritesThroughEdge: a write that an edge forwards to its origin (a client of
// the edge) invalidates the origin's tracking clients: rueidis on the origin reads it.
func TestTrackingWritesThroughEdge(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	targets := multiTargets(t)
	waitForwarding(t, targets["edge"].Addr)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{targets["origin"].Addr}, DisableRetry: true,
		Dialer: net.Dialer{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatalf("rueidis on the origin: %v", err)
	}
	defer c.Close()
	edge := targets["edge"].client(t, nil)
	for want := int64(1); want <= 5; want++ {
		if err := edge.Incr(ctx, "through-edge").Err(); err != nil {
			t.Fatalf("INCR through the edge: %v", err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, err := c.DoCache(ctx, c.B().Get().Key("through-edge").Cache(), time.Minute).AsInt64()
			if err == nil && v == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DoCache GET on the origin = %d, %v 20 s after the edge's client made it %d", v, err, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
