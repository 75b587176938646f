package integration

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// tokenBucket is a hash-free token bucket as users write it over strings: the tokens and
// the last refill time in two keys, the caller's clock in ARGV (so both servers decide the
// same), numbers written back through redis.call (Redis's "%.17g" conversion).
const tokenBucket = `local tokens_key, ts_key = KEYS[1], KEYS[2]
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
local now, requested = tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl = math.floor(capacity / rate * 2)
local last = tonumber(redis.call('get', tokens_key)) or capacity
local ts = tonumber(redis.call('get', ts_key)) or 0
local filled = math.min(capacity, last + math.max(0, now - ts) * rate)
local allowed = filled >= requested
local new = filled
if allowed then new = filled - requested end
redis.call('setex', tokens_key, ttl, new)
redis.call('setex', ts_key, ttl, now)
return {allowed and 1 or 0, tostring(new), redis.call('get', tokens_key)}
`

// fixedWindow is the INCR-and-expire window scripts most often are.
const fixedWindow = `local n = redis.call('incr', KEYS[1])
if n == 1 then redis.call('pexpire', KEYS[1], ARGV[1]) end
return {n, redis.call('pttl', KEYS[1])}`

// luaCompare is sent to ratchet and to redis-server in order: scripts without a native
// path, which ratchet runs on its interpreter.
var luaCompare = [][]string{
	{"EVAL", fixedWindow, "1", "fw", "60000"},
	{"EVAL", fixedWindow, "1", "fw", "60000"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "100", "1"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "100", "1"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "100.3", "1"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "100.3", "1"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "100.3", "1"},
	{"EVAL", tokenBucket, "2", "tb:t", "tb:ts", "0.5", "3", "103", "2"},
	{"TTL", "tb:t"},
	{"EVAL", "return {1, 'a', {2, false, 3}, true, nil, 4}", "0"},
	{"EVAL", "return {3.99, -3.99, {ok='fine'}, {err='My err'}}", "0"},
	{"EVAL", "return redis.status_reply('FINE')", "0"},
	{"EVAL", "return redis.error_reply('CODE msg')", "0"},
	{"EVAL", "return cjson.encode({a={1,2,3}, b='x/y'})", "0"},
	{"EVAL", "return cjson.decode(ARGV[1]).n", "0", `{"n":42}`},
	{"EVAL", "local c = cjson.new() c.encode = nil return {tostring(c == cjson), tostring(c.new() == c), cjson.encode({1})}", "0"},
	{"EVAL", "return {bit.band(ARGV[1], 0xff), bit.tohex(ARGV[1])}", "0", "4660"},
	{"EVAL", "return struct.unpack('>I4', struct.pack('>I4', ARGV[1]))", "0", "305419896"},
	{"EVAL", "return redis.sha1hex(ARGV[1])", "0", "abc"},
	{"EVAL", "redis.call('set', KEYS[1], 'x') return redis.call('incr', KEYS[1])", "1", "str"},
	{"EVAL", "redis.call('set', KEYS[1], 'x') return redis.pcall('incr', KEYS[1])", "1", "str"},
	{"EVAL", "return redis.call('incr')", "0"},
	{"EVAL", "return redis.call('nosuchcommand')", "0"},
	{"EVAL", "return undefined_global", "0"},
	{"EVAL", "x = 1", "0"},
	{"EVAL", "\n\nerror('boom')", "0"},
	{"EVAL", "return type(os) ", "0"},
	{"EVAL", "return {type(getmetatable(_G)), type(getmetatable(getmetatable(_G))), type(getmetatable(getmetatable('')))}", "0"},
	{"EVAL", "local t = {} t[1] = 1 t[2] = 2 t[4] = 4 return t", "0"},
	{"EVAL_RO", "return redis.call('incr', KEYS[1])", "1", "fw"},
	{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "fw"},
	{"EVAL", "redis.setresp(3) return redis.call('get', KEYS[1])", "1", "nokey"},
	{"EVAL", "redis.setresp(3) return {true, false}", "0"},
	{"EVAL", "return {true, false}", "0"},
	{"SCRIPT", "LOAD", "return ARGV[1] .. KEYS[1]"},
	{"EVALSHA", "0dad4dbc3c5a6d9de1ac6ea6b8e14cbcd6efd8bd", "1", "k", "v"},
	{"SCRIPT", "EXISTS", "0dad4dbc3c5a6d9de1ac6ea6b8e14cbcd6efd8bd", "0000000000000000000000000000000000000000"},
	{"SCRIPT", "FLUSH"},
	{"EVALSHA", "0dad4dbc3c5a6d9de1ac6ea6b8e14cbcd6efd8bd", "1", "k", "v"},
	{"SCRIPT", "KILL"},
	{"MULTI"},
	{"EVAL", fixedWindow, "1", "fw2", "5000"},
	{"INCR", "fw2"},
	{"EXEC"},
	{"DEL", "fw", "fw2", "tb:t", "tb:ts", "str"},
}

// TestLuaMatchesRedisServer runs luaCompare against ratchet and a real redis-server, in
// RESP2 and RESP3, and compares every reply byte for byte, except that integers of four
// digits or more (PTTL in ms) may differ by 100.
func TestLuaMatchesRedisServer(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	ms := regexp.MustCompile(`:(\d{4,})\r\n`)
	close := func(want, got string) bool {
		wn, gn := ms.FindAllStringSubmatch(want, -1), ms.FindAllStringSubmatch(got, -1)
		if len(wn) != len(gn) || ms.ReplaceAllString(want, "#") != ms.ReplaceAllString(got, "#") {
			return false
		}
		for i := range wn {
			a, _ := strconv.ParseInt(wn[i][1], 10, 64)
			b, _ := strconv.ParseInt(gn[i][1], 10, 64)
			if a-b > 100 || b-a > 100 {
				return false
			}
		}
		return true
	}
	for _, proto := range []string{"2", "3"} {
		rc, rt := dialProto(t, redisAddr, proto), dialProto(t, p.Addr, proto)
		for _, args := range luaCompare {
			rc.send(args...)
			rt.send(args...)
			if want, got := rawReply(t, rc), rawReply(t, rt); want != got && !close(want, got) {
				t.Errorf("RESP%s %q:\n redis-server %q\n ratchet      %q", proto, args, want, got)
			}
		}
	}
}

// dialProto connects to addr and switches the connection to RESP proto with HELLO.
func dialProto(t *testing.T, addr, proto string) *rawConn {
	c := dialRaw(t, addr)
	c.send("HELLO", proto)
	rawReply(t, c)
	return c
}

// TestLuaThroughEdges: a script with no native path sent to edges runs on the origin, one
// counter whichever node is asked; go-redis's Script.Run (EVALSHA, EVAL after NOSCRIPT)
// works through an edge that never saw the script.
func TestLuaThroughEdges(t *testing.T) {
	ctx := context.Background()
	origin := startOrigin(t)
	edges := startEdges(t, 2, []*proc{origin})
	script := redis.NewScript(fixedWindow)
	clients := []*redis.Client{edges[0].client(t, nil), edges[1].client(t, &redis.Options{Protocol: 2}), origin.client(t, nil)}
	for i, c := range append(clients, clients[0]) {
		v, err := script.Run(ctx, c, []string{"edge:fw"}, 60000).Int64Slice()
		if err != nil || len(v) != 2 || v[0] != int64(i+1) || v[1] < 50000 || v[1] > 60000 {
			t.Fatalf("run %d: %v %v, want [%d ~60000]", i+1, v, err, i+1)
		}
	}
	err := clients[1].Eval(ctx, "return (", nil).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR Error compiling script (new function): user_script:1: ") {
		t.Fatalf("a syntax error through an edge: %v", err)
	}
}

// TestLuaScriptLoadThroughEdge: a library pointed at an edge works as on Redis: SCRIPT
// LOAD through an edge, then EVALSHA through it, runs the script (the edge forwards it as
// EVAL of the text it cached); EVALSHA through an edge of a script loaded on the origin
// only is forwarded as it is and runs there; SCRIPT EXISTS on an edge answers its own cache.
func TestLuaScriptLoadThroughEdge(t *testing.T) {
	ctx := context.Background()
	origin := startOrigin(t)
	edges := startEdges(t, 2, []*proc{origin})
	e1, e2, oc := edges[0].client(t, nil), edges[1].client(t, &redis.Options{Protocol: 2}), origin.client(t, nil)
	sha, err := e1.ScriptLoad(ctx, fixedWindow).Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD through an edge: %v", err)
	}
	for i, c := range []*redis.Client{e1, e1} {
		v, err := c.EvalSha(ctx, sha, []string{"edge:load"}, 60000).Int64Slice()
		if err != nil || len(v) != 2 || v[0] != int64(i+1) {
			t.Fatalf("EVALSHA %d through the edge that loaded it: %v %v", i+1, v, err)
		}
	}
	if ex, err := e1.ScriptExists(ctx, sha).Result(); err != nil || len(ex) != 1 || !ex[0] {
		t.Fatalf("SCRIPT EXISTS on the edge that loaded it: %v %v", ex, err)
	}
	const other = "return redis.call('incrby', KEYS[1], ARGV[1])"
	osha, err := oc.ScriptLoad(ctx, other).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e2.EvalSha(ctx, osha, []string{"edge:other"}, 5).Int64(); err != nil || n != 5 {
		t.Fatalf("EVALSHA through an edge of a script loaded on the origin: %d %v", n, err)
	}
	if ex, err := e2.ScriptExists(ctx, osha).Result(); err != nil || len(ex) != 1 || ex[0] {
		t.Fatalf("SCRIPT EXISTS on an edge that never saw it (its own cache): %v %v", ex, err)
	}
	if err := e2.EvalSha(ctx, "0123456789abcdef0123456789abcdef01234567", nil).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script no node knows: %v", err)
	}
}
