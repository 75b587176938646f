package integration

// The counter keyspace and CL.THROTTLE with the real binary: go-redis as the limiter
// libraries use it, the same commands against a real redis-server compared byte for byte,
// and redis-cell's CL.THROTTLE sequences (README "Counter commands and CL.THROTTLE").

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestKVGoRedis: go-redis against an origin, in RESP2 and RESP3: the calls of
// rate-limiter-flexible (MULTI SET EX/GET + PTTL EXEC), envoy's ratelimit (pipelined
// INCRBY + EXPIRE), rack-attack (SCAN MATCH + DEL), and plain counters.
func TestKVGoRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := start(t, "--data-dir", "")
	for _, proto := range []int{2, 3} {
		c := p.client(t, &redis.Options{Protocol: proto})
		pre := fmt.Sprintf("p%d:", proto)

		if v, err := c.Get(ctx, pre+"none").Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("RESP%d GET missing: %q %v", proto, v, err)
		}
		if err := c.Set(ctx, pre+"s", "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Get(ctx, pre+"s").Result(); v != "hello" {
			t.Fatalf("RESP%d GET: %q", proto, v)
		}
		if ok, _ := c.SetNX(ctx, pre+"s", "x", time.Minute).Result(); ok {
			t.Fatalf("RESP%d SETNX on an existing key succeeded", proto)
		}
		if n, err := c.IncrBy(ctx, pre+"n", 5).Result(); n != 5 || err != nil {
			t.Fatalf("RESP%d INCRBY: %d %v", proto, n, err)
		}
		if err := c.Incr(ctx, pre+"s").Err(); err == nil || err.Error() != "ERR value is not an integer or out of range" {
			t.Fatalf("RESP%d INCR of a string: %v", proto, err)
		}
		if ok, _ := c.Expire(ctx, pre+"n", 90*time.Second).Result(); !ok {
			t.Fatalf("RESP%d EXPIRE returned false", proto)
		}
		if d, _ := c.TTL(ctx, pre+"n").Result(); d != 90*time.Second {
			t.Fatalf("RESP%d TTL: %v", proto, d)
		}
		if d, _ := c.PTTL(ctx, pre+"n").Result(); d <= 89*time.Second || d > 90*time.Second {
			t.Fatalf("RESP%d PTTL: %v", proto, d)
		}
		if ok, _ := c.ExpireGT(ctx, pre+"n", 10*time.Second).Result(); ok {
			t.Fatalf("RESP%d EXPIRE GT with a shorter TTL succeeded", proto)
		}

		// rate-limiter-flexible's set() then get().
		pipe := c.TxPipeline()
		pipe.Set(ctx, pre+"rlflx:k", 3, 60*time.Second)
		pttl := pipe.PTTL(ctx, pre+"rlflx:k")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("RESP%d MULTI SET PTTL EXEC: %v", proto, err)
		}
		if pttl.Val() != 60*time.Second {
			t.Fatalf("RESP%d PTTL in EXEC right after SET EX 60: %v", proto, pttl.Val())
		}
		pipe = c.TxPipeline()
		get := pipe.Get(ctx, pre+"rlflx:k")
		pttl = pipe.PTTL(ctx, pre+"rlflx:k")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("RESP%d MULTI GET PTTL EXEC: %v", proto, err)
		}
		if get.Val() != "3" || pttl.Val() <= 59*time.Second {
			t.Fatalf("RESP%d MULTI GET PTTL EXEC: %q %v", proto, get.Val(), pttl.Val())
		}

		// envoy's ratelimit: a pipeline of INCRBY + EXPIRE per descriptor.
		pl := c.Pipeline()
		var incrs []*redis.IntCmd
		for i := range 3 {
			incrs = append(incrs, pl.IncrBy(ctx, pre+"envoy_"+strconv.Itoa(i%2), 2))
			pl.Expire(ctx, pre+"envoy_"+strconv.Itoa(i%2), time.Minute)
		}
		if _, err := pl.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if incrs[0].Val() != 2 || incrs[1].Val() != 2 || incrs[2].Val() != 4 {
			t.Fatalf("RESP%d pipelined INCRBY: %d %d %d", proto, incrs[0].Val(), incrs[1].Val(), incrs[2].Val())
		}

		// rack-attack's reset: SCAN MATCH, then DEL what it found.
		for i := range 250 {
			c.Set(ctx, fmt.Sprintf("%srack::attack:%d", pre, i), i, time.Hour)
		}
		var found []string
		it := c.Scan(ctx, 0, pre+"rack::attack:*", 20).Iterator()
		for it.Next(ctx) {
			found = append(found, it.Val())
		}
		if err := it.Err(); err != nil || len(dedupe(found)) != 250 {
			t.Fatalf("RESP%d SCAN found %d distinct keys (%v)", proto, len(dedupe(found)), err)
		}
		if n, _ := c.Del(ctx, dedupe(found)...).Result(); n != 250 {
			t.Fatalf("RESP%d DEL deleted %d", proto, n)
		}
		if n, _ := c.Exists(ctx, pre+"s", pre+"s", pre+"rack::attack:1").Result(); n != 2 {
			t.Fatalf("RESP%d EXISTS: %d", proto, n)
		}
	}
}

func dedupe(keys []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestThrottleBinary: CL.THROTTLE sequences with redis-cell's replies, alone, in a
// transaction; on an edge the origin runs them.
func TestThrottleBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	origin := startOrigin(t, "--data-dir", "")
	c := origin.client(t, nil)
	throttle := func(args ...any) []int64 {
		t.Helper()
		v, err := c.Do(ctx, append([]any{"CL.THROTTLE"}, args...)...).Int64Slice()
		if err != nil {
			t.Fatalf("CL.THROTTLE %v: %v", args, err)
		}
		return v
	}
	// redis-cell's e2e test: max_burst 0, 1 per 2 s.
	if got := throttle("user123", 0, 1, 2, 1); fmt.Sprint(got) != "[0 1 0 -1 2]" {
		t.Fatalf("first: %v", got)
	}
	if got := throttle("user123", 0, 1, 2, 1); fmt.Sprint(got) != "[1 1 0 2 2]" {
		t.Fatalf("second: %v", got)
	}
	// A burst of 5 at 1 per minute: 5 allowed with 4..0 remaining, then limited for 60 s.
	for i := range 5 {
		if got, want := throttle("burst", 4, 1, 60), fmt.Sprintf("[0 5 %d -1 %d]", 4-i, 60*(i+1)); fmt.Sprint(got) != want {
			t.Fatalf("request %d: %v, want %s", i, got, want)
		}
	}
	if got := throttle("burst", 4, 1, 60); fmt.Sprint(got) != "[1 5 0 60 300]" {
		t.Fatalf("over the burst: %v", got)
	}
	if got := throttle("burst", 4, 1, 60, 0); fmt.Sprint(got) != "[0 5 0 -1 300]" {
		t.Fatalf("peek: %v", got)
	}
	if tat, err := c.Get(ctx, "burst").Int64(); err != nil || tat < time.Now().Add(299*time.Second).UnixNano() {
		t.Fatalf("GET of the state: %d %v", tat, err)
	}
	if err := c.Del(ctx, "burst").Err(); err != nil {
		t.Fatal(err)
	}
	if got := throttle("burst", 4, 1, 60); fmt.Sprint(got) != "[0 5 4 -1 60]" {
		t.Fatalf("after DEL: %v", got)
	}
	if err := c.Do(ctx, "CL.THROTTLE", "k", "x", 1, 1).Err(); err == nil || err.Error() != "Cell error: Couldn't parse as integer: x" {
		t.Fatalf("parse error: %v", err)
	}

	pipe := c.TxPipeline()
	a := pipe.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 10)
	b := pipe.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 10)
	d := pipe.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 10)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("TxPipeline: %v", err)
	}
	if fmt.Sprint(a.Val(), b.Val(), d.Val()) != "[0 2 1 -1 10] [0 2 0 -1 20] [1 2 0 10 20]" {
		t.Fatalf("in a transaction: %v %v %v", a.Val(), b.Val(), d.Val())
	}
	// On an edge the origin runs them: TestEdgeForwardsRegionalCommands.
}

// kvCompareScript is sent to ratchet and to redis-server in order; each reply is compared
// byte for byte, except that integers above 1000 (PTTL, TTL in ms) may differ by 100.
var kvCompareScript = []string{
	"GET k", "SET k v", "GET k", "SET k v2 NX", "SET k v3 XX GET", "SET n1 v NX XX", "SET k v EX 0",
	"SET k v EX -1", "SET k v EX abc", "SET k v EX 10 PX 100", "SET k v KEEPTTL EX 10", "SET k v EX",
	"SET k v FOO", "SET k v EX 9223372036854775807", "SET k v PX 9223372036854775807", "SET k v EX 10 EX 20",
	"SET k v NX NX", "SET k v GET GET", "SET nokey v GET", "SET k v EX 1.5", "SET k v EX +5",
	"SET k v PX 5000 GET", "PTTL k", "TTL k", "SET k w KEEPTTL", "PTTL k", "SET k w", "PTTL k",
	"SETEX k 0 v", "SETEX k abc v", "SETEX k 10 v", "PSETEX k -5 v", "PSETEX k 2400 v", "PTTL k", "TTL k",
	"INCR k", "INCR c", "INCRBY c 5", "INCRBY c abc", "INCRBY c +5", "INCRBY c 01", "DECRBY c -9223372036854775808",
	"DECR c", "DECRBY c 10", "INCRBY c -3", "SET big 9223372036854775807", "INCR big", "SET neg -9223372036854775808",
	"DECR neg", "SET lz 01", "INCR lz", "SET sp ' 1'", "INCR sp", "SET f 1.5", "INCR f",
	"EXPIRE c 100 NX XX", "EXPIRE c 100 GT LT", "EXPIRE c 100 FOO", "EXPIRE c abc", "EXPIRE nokey 100",
	"EXPIRE c 100 XX", "EXPIRE c 100 NX", "EXPIRE c 100 NX", "EXPIRE c 50 GT", "EXPIRE c 200 GT",
	"EXPIRE c 300 LT", "EXPIRE c 150 LT", "EXPIRE c 149 xx gt", "TTL c", "PTTL c", "TTL nokey", "PEXPIRE c 1400",
	"TTL c", "PERSIST c", "PERSIST c", "TTL c", "EXPIRE c 9223372036854775807", "EXPIRE c 9223372036854775",
	"PEXPIRE c 9223372036854775807", "EXPIREAT c 1", "EXISTS c", "SET c 1", "PEXPIREAT c 0", "EXISTS c",
	"SET c 7", "EXPIRE c -1", "EXISTS c", "EXISTS k k nokey", "DEL k k nokey", "DEL k", "UNLINK big neg",
	"TYPE lz", "TYPE nokey", "SCAN abc", "SCAN 0 COUNT 0", "SCAN 0 COUNT abc", "SCAN 0 FOO", "SCAN 0 MATCH",
	"GET", "SET k", "INCRBY k", "EXPIRE k", "DEL", "SCAN",
	"MULTI", "SET rlflx:k 3 EX 60", "PTTL rlflx:k", "EXEC",
	"MULTI", "GET rlflx:k", "PTTL rlflx:k", "EXEC",
	"MULTI", "INCRBY rlflx:k 2", "SET x y EX 0", "GET rlflx:k", "EXEC",
	"MULTI", "GET", "EXEC",
	"MULTI", "INCR e1", "EXPIRE e1 60", "INCR e1", "TTL e1", "EXEC",
	"DEL rlflx:k e1 c n1 lz sp f x nokey",
}

// TestKVMatchesRedisServer runs kvCompareScript against ratchet and a real redis-server
// and compares every reply, in RESP2 and RESP3, then compares full SCAN walks.
func TestKVMatchesRedisServer(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t) // skips (fails under RATCHET_CI=1) without redis-server
	p := start(t, "--data-dir", "")
	for _, proto := range []string{"2", "3"} {
		compareRaw(t, redisAddr, p.Addr, proto, kvCompareScript, true)
	}
	// SCAN: the same keys in a full walk (orders and cursors differ).
	ctx := context.Background()
	cr := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = cr.Close() })
	ct := p.client(t, nil)
	for _, c := range []*redis.Client{cr, ct} {
		for i := range 300 {
			c.Set(ctx, fmt.Sprintf("scan:%d:%s", i, []string{"a", "b", "[c]"}[i%3]), i, 0)
		}
	}
	for _, pattern := range []string{"*", "scan:1*", "scan:*:a", "scan:?:*", "scan:[12]?:[ab]", "scan:*:\\[c\\]", "scan:1[^0-5]:*"} {
		walk := func(c *redis.Client) []string {
			var keys []string
			it := c.Scan(ctx, 0, pattern, 17).Iterator()
			for it.Next(ctx) {
				keys = append(keys, it.Val())
			}
			if err := it.Err(); err != nil {
				t.Fatalf("SCAN MATCH %s: %v", pattern, err)
			}
			return dedupe(keys)
		}
		if want, got := walk(cr), walk(ct); strings.Join(want, ",") != strings.Join(got, ",") {
			t.Errorf("SCAN MATCH %s: redis-server %d keys, ratchet %d keys\n%v\n%v", pattern, len(want), len(got), want, got)
		}
	}
}

// splitQuoted splits a script line on spaces; 'quoted words' keep their spaces.
func splitQuoted(line string) []string {
	var out []string
	for len(line) > 0 {
		if line[0] == '\'' {
			end := strings.IndexByte(line[1:], '\'') + 1
			out = append(out, line[1:end])
			line = strings.TrimPrefix(line[end+1:], " ")
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		out = append(out, word)
		line = rest
	}
	return out
}

// rawReply reads one reply from c and returns its exact bytes.
func rawReply(t testing.TB, c *rawConn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	if err := copyReply(c.r, &b); err != nil {
		t.Fatalf("read reply: %v (so far %q)", err, b.String())
	}
	return b.String()
}

func copyReply(r *bufio.Reader, b *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	b.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
	switch line[0] {
	case '$', '=', '!':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		b.Write(buf)
	case '*', '~', '>', '%', '|':
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if err := copyReply(r, b); err != nil {
				return err
			}
		}
	}
	return nil
}
