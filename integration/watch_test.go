package integration

// WATCH on the counter keyspace, against redis-server: a change to a watched key between
// WATCH and EXEC makes EXEC answer null (README "Transactions").

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// errWatchOnEdge is an edge's reply to WATCH.
const errWatchOnEdge = "ERR WATCH is not supported on an edge: the keys live on the origin, which cannot see this connection's transaction; connect to the origin to WATCH"

// watchIncr is go-redis's optimistic-locking example: WATCH key, GET, then SET value+1 in
// a transaction; between GET and EXEC, meddle runs (another client's write) unless nil.
// It returns the error of Watch (redis.TxFailedErr when EXEC answered null).
func watchIncr(ctx context.Context, c *redis.Client, key string, meddle func() error) error {
	return c.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		n, _ := strconv.Atoi(v) // 0 unless the value is an integer
		if meddle != nil {
			if err := meddle(); err != nil {
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, key, n+1, 0)
			return nil
		})
		return err
	}, key)
}

// TestWatchGoRedis: go-redis Watch with a concurrent INCR from another client fails with
// TxFailedErr on ratchet's origin as on redis-server, and leaves the other client's
// write; without one it succeeds; in RESP2 and RESP3. A script's write (go-redis/redis_rate
// on the watched key) fails it too. On an edge WATCH is refused.
func TestWatchGoRedis(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	redisAddr := startRedisServer(t)
	targets := multiTargets(t)
	for _, proto := range []int{2, 3} {
		for name, addr := range map[string]string{"redis-server": redisAddr, "origin": targets["origin"].Addr} {
			opt := &redis.Options{Addr: addr, Protocol: proto}
			c, other := redis.NewClient(opt), redis.NewClient(opt)
			key := "watched"
			if err := other.Set(ctx, key, 10, 0).Err(); err != nil {
				t.Fatal(err)
			}
			incr := func() error { return other.Incr(ctx, key).Err() }
			if err := watchIncr(ctx, c, key, incr); !errors.Is(err, redis.TxFailedErr) {
				t.Errorf("%s RESP%d: Watch with another client's INCR = %v, want TxFailedErr", name, proto, err)
			}
			if v, _ := other.Get(ctx, key).Int(); v != 11 {
				t.Errorf("%s RESP%d: after the failed transaction the key is %d, want 11 (the other client's INCR)", name, proto, v)
			}
			if err := watchIncr(ctx, c, key, nil); err != nil {
				t.Errorf("%s RESP%d: Watch alone = %v", name, proto, err)
			}
			if v, _ := other.Get(ctx, key).Int(); v != 12 {
				t.Errorf("%s RESP%d: after the transaction the key is %d, want 12", name, proto, v)
			}
			limiter := redis_rate.NewLimiter(other)
			script := func() error { _, err := limiter.Allow(ctx, "api", redis_rate.PerSecond(10)); return err }
			if err := script(); err != nil { // the key exists, holding a number, before WATCH
				t.Fatal(err)
			}
			if err := watchIncr(ctx, c, "rate:api", script); !errors.Is(err, redis.TxFailedErr) {
				t.Errorf("%s RESP%d: Watch with a redis_rate script's write = %v, want TxFailedErr", name, proto, err)
			}
			other.Del(ctx, "rate:api")
			_ = c.Close()
			_ = other.Close()
		}
	}
	edge := targets["edge"].client(t, nil)
	err := watchIncr(ctx, edge, "watched", nil)
	if err == nil || err.Error() != errWatchOnEdge {
		t.Errorf("Watch on an edge = %v, want the refusal", err)
	}
}

// TestWatchMatchesRedisServer: two connections, A watching and B writing, replies
// compared byte for byte with redis-server's in RESP2 and RESP3: each kind of change
// (SET, INCR, EXPIRE, PERSIST, DEL, a TTL that passes), and what is no change
// (a read, DEL of nothing, another key), FLUSHALL and FLUSHDB (a change when they remove
// the key), and that EXEC, DISCARD and UNWATCH forget.
func TestWatchMatchesRedisServer(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t)
	p := startOrigin(t, "--data-dir", "")
	type step struct {
		conn byte // 'A' or 'B'
		line string
	}
	var script []step
	add := func(conn byte, lines ...string) {
		for _, l := range lines {
			script = append(script, step{conn, l})
		}
	}
	tx := func() { add('A', "MULTI", "INCR k", "EXEC") }
	for _, change := range []string{"SET k 5", "INCR k", "EXPIRE k 100", "DEL k", "PERSIST k", "INCRBY k 0", "FLUSHALL",
		"FLUSHDB ASYNC"} {
		add('B', "SET k 1 EX 100")
		add('A', "WATCH k")
		add('B', change)
		tx()
	}
	for _, noChange := range []string{"GET k", "DEL nokey", "SET other 1", "TTL k", "EXISTS k"} {
		add('B', "SET k 1")
		add('A', "WATCH k")
		add('B', noChange)
		tx()
	}
	// A flush when the watched key is missing: no change (Redis touches the keys it empties).
	add('B', "DEL k")
	add('A', "WATCH k")
	add('B', "SET other 1", "FLUSHALL")
	tx()
	// Watched while missing, created then deleted: a change.
	add('B', "DEL k")
	add('A', "WATCH k")
	add('B', "SET k 1", "DEL k")
	tx()
	// The connection's own write counts; several keys; EXEC and DISCARD forget.
	add('A', "WATCH k", "SET k 2")
	tx()
	add('A', "WATCH a k b")
	add('B', "SET b 1")
	tx()
	tx()
	add('A', "WATCH k", "MULTI", "DISCARD")
	add('B', "SET k 3")
	tx()
	add('A', "WATCH k", "UNWATCH")
	add('B', "SET k 4")
	tx()
	add('A', "WATCH k", "EXEC") // EXEC without MULTI keeps the watch
	add('B', "SET k 5")
	tx()
	// A TTL that passes between WATCH and EXEC.
	add('B', "SET k 1 PX 3000")
	add('A', "WATCH k", "DEBUG-SLEEP", "MULTI", "GET k", "EXEC")
	add('B', "DEL k a b other")

	for _, proto := range []string{"2", "3"} {
		conns := map[string]map[byte]*rawConn{}
		for name, addr := range map[string]string{"redis-server": redisAddr, "ratchet": p.Addr} {
			conns[name] = map[byte]*rawConn{'A': dialRaw(t, addr), 'B': dialRaw(t, addr)}
			for _, c := range conns[name] {
				c.send("HELLO", proto)
				rawReply(t, c)
			}
		}
		for i, s := range script {
			if s.line == "DEBUG-SLEEP" {
				time.Sleep(3100 * time.Millisecond) // past the TTL (3 s: WATCH comes well before, even on a loaded machine); any longer wait gives the same replies
				continue
			}
			args := splitQuoted(s.line)
			var replies [2]string
			for j, name := range []string{"redis-server", "ratchet"} {
				c := conns[name][s.conn]
				c.send(args...)
				replies[j] = rawReply(t, c)
			}
			if replies[0] != replies[1] {
				t.Errorf("RESP%s step %d %c: %s:\n redis-server %q\n ratchet      %q", proto, i, s.conn, s.line, replies[0], replies[1])
			}
		}
	}
}

// watchRedisPy is redis-py's optimistic-locking idiom (pipeline.watch, then multi and
// execute), with another connection's INCR between WATCH and EXEC when argv[2] is
// "meddle". It prints "committed N" or "WatchError".
const watchRedisPy = `
import sys, redis
host, port = sys.argv[1].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port))
other = redis.Redis(host=host, port=int(port))
r.set("pywatched", 10)
with r.pipeline() as pipe:
    pipe.watch("pywatched")
    n = int(pipe.get("pywatched"))
    if sys.argv[2] == "meddle":
        other.incr("pywatched")
    pipe.multi()
    pipe.set("pywatched", n + 1)
    try:
        pipe.execute()
        print("committed", int(r.get("pywatched")))
    except redis.WatchError:
        print("WatchError", int(r.get("pywatched")))
`

// TestWatchRedisPy: redis-py's WATCH idiom raises WatchError on ratchet's origin as on
// redis-server when another connection writes the key, and commits when none does.
func TestWatchRedisPy(t *testing.T) {
	t.Parallel()
	runWatchProgram(t, pythonWithRedis(t), "", []string{"-c", watchRedisPy},
		map[string]string{"meddle": "WatchError 11\n", "alone": "committed 11\n"})
}

// runWatchProgram runs interpreter with args, then the address of redis-server or of
// ratchet's origin, then "meddle" or "alone", in dir; each run must print want[mode].
func runWatchProgram(t *testing.T, interpreter, dir string, args []string, want map[string]string) {
	t.Helper()
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	for _, mode := range []string{"meddle", "alone"} {
		var outs []string
		for _, addr := range []string{redisAddr, p.Addr} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			cmd := exec.CommandContext(ctx, interpreter, append(args, addr, mode)...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("%s against %s: %v\n%s", mode, addr, err, out)
			}
			outs = append(outs, string(out))
		}
		if outs[0] != want[mode] || outs[1] != want[mode] {
			t.Errorf("%s: redis-server %q, ratchet %q, want %q", mode, outs[0], outs[1], want[mode])
		}
	}
}

// watchIoredis is ioredis's WATCH idiom: watch, get, then multi().set().exec(), which
// resolves to null when EXEC answered null; another connection's INCR between WATCH and
// EXEC when argv[2] is "meddle". It prints the exec result and the key's value.
const watchIoredis = `
const Redis = require("ioredis");
const [host, port] = process.argv[1].split(":");
(async () => {
  const r = new Redis(Number(port), host), other = new Redis(Number(port), host);
  await r.set("iowatched", 10);
  await r.watch("iowatched");
  const n = Number(await r.get("iowatched"));
  if (process.argv[2] === "meddle") await other.incr("iowatched");
  const res = await r.multi().set("iowatched", n + 1).exec();
  console.log(JSON.stringify(res), await other.get("iowatched"));
  r.disconnect(); other.disconnect();
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestWatchIoredis: ioredis's exec() resolves to null on ratchet's origin as on
// redis-server when another connection writes the watched key, and commits when none
// does.
func TestWatchIoredis(t *testing.T) {
	t.Parallel()
	runWatchProgram(t, nodeWithClients(t, "ioredis"), clientsDir(t), []string{"-e", watchIoredis},
		map[string]string{"meddle": "null 11\n", "alone": "[[null,\"OK\"]] 11\n"})
}
