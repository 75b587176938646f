package integration

// The real Node and Python limiter libraries against the binary and against redis-server:
// rate-limiter-flexible over ioredis and over node-redis, express-rate-limit with
// rate-limit-redis 5.0.0 and 6.0.1, bottleneck's clustering over ioredis, Debian's
// python3-limits, @nestjs/throttler's guard with @nest-lab/throttler-storage-redis 1.2.0 and
// nestjs-throttler-storage-redis 0.5.1, and koa-ratelimit 6.0.0 (async-ratelimiter 1.6.10).
// Each scenario is a small program in clients/limiters/ that prints one JSON line per
// decision; the test runs it against a fresh redis-server and a fresh ratchet and compares
// every line (README "Limiter libraries tested").

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// limiterScenario is one library's scenario program.
type limiterScenario struct {
	name   string
	tool   func(t *testing.T) string // the interpreter, or a skip (a failure under RATCHET_CI=1)
	file   string                    // in clients/limiters
	extra  []string                  // arguments after ADDR
	shas   []string                  // the scripts the library sends (their SHA1s, for the reader)
	lacks  []string                  // the commands its scripts call that Ratchet's keyspace has not
	expect string                    // decisions on redis-server, see decisions
}

// Installs what the Python scenario needs on Debian.
const installPythonLimits = "apt-get install -y python3-limits python3-redis"

// pythonWithLimits returns a python3 that can import limits and redis: the one
// pythonWithRedis picks, else Debian's (apt's python3-limits serves /usr/bin/python3).
func pythonWithLimits(t *testing.T) string {
	t.Helper()
	py := pythonWithRedis(t)
	for _, cand := range []string{py, "/usr/bin/python3"} {
		if importsLimits(cand) {
			return cand
		}
	}
	missingTool(t, fmt.Sprintf("no python3 with the limits and redis modules (tried %s and /usr/bin/python3)", py),
		installPythonLimits)
	return ""
}

func importsLimits(python string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, python, "-c", "import limits.storage, redis").Run() == nil
}

func nodeWith(pkgs ...string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		var node string
		for _, p := range pkgs {
			node = nodeWithClients(t, p)
		}
		return node
	}
}

// SHA1s of the scripts the scenarios send (shared/dropin/known_scripts.tsv).
const (
	shaRLFlexible       = "a1de965f42e177aa339706bd580f049065eca79a" // rate-limiter-flexible incrTtl
	shaRLRedisIncrement = "81dbecea94d2d10514719b20ed51faf711529d9d" // rate-limit-redis 4.2.3-5.0.0 increment
	shaRLRedisGet       = "6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a" // rate-limit-redis get
	// rate-limit-redis 6.0.x's increment (ARGV windowMs only): not in known_scripts.tsv.
	shaRLRedis6Increment = "895b92e1712734e1b464999be23953485475357b"
	shaLimitsIncrExpire  = "628bd136a573a06b346879695681af12ccef300f" // limits fixed window
	// limits 2.8's moving window (Debian bookworm's python3-limits): texts that differ from
	// the 3.x-5.x ones in known_scripts.tsv, over a Redis LIST.
	shaLimits28AcquireMoving = "d19f37c18768a509dbf1310a257bfc35be65609f"
	shaLimits28MovingWindow  = "3136f0028c572d2959b5cdc5ec15b287fab6a9ff"
	// Not in known_scripts.tsv, no native path: the interpreter runs them.
	shaNestThrottler    = "f1e0da9c495676ab6904eb80db1f2811d5347f58" // both NestJS Redis storages' increment
	shaAsyncRatelimiter = "ad00ff6f099013f2aea94ed48c220cbf616c6a07" // async-ratelimiter 1.6.10 (koa-ratelimit)
)

// limiterScenarios: expect is the decisions column on redis-server, one character per line
// that decides: + allowed (HTTP 200), - denied (HTTP 429).
var limiterScenarios = []limiterScenario{
	{name: "rate-limiter-flexible/ioredis", tool: nodeWith("rate-limiter-flexible", "ioredis"),
		file: "rate-limiter-flexible.js", extra: []string{"ioredis"}, shas: []string{shaRLFlexible},
		expect: "+++++--++--"},
	{name: "rate-limiter-flexible/node-redis", tool: nodeWith("rate-limiter-flexible", "redis"),
		file: "rate-limiter-flexible.js", extra: []string{"node-redis"}, shas: []string{shaRLFlexible},
		expect: "+++++--++--"},
	{name: "rate-limit-redis", tool: nodeWith("rate-limit-redis", "express-rate-limit", "express", "redis"),
		file: "rate-limit-redis.js", shas: []string{shaRLRedisIncrement, shaRLRedisGet},
		expect: "+++--+++"},
	{name: "rate-limit-redis-6", tool: nodeWith("rate-limit-redis-6", "express-rate-limit", "express", "redis"),
		file: "rate-limit-redis.js", extra: []string{"rate-limit-redis-6"}, shas: []string{shaRLRedis6Increment, shaRLRedisGet},
		expect: "+++--+++"},
	{name: "limits/fixed-window", tool: pythonWithLimits,
		file: "python-limits.py", extra: []string{"fixed-window"}, shas: []string{shaLimitsIncrExpire},
		expect: "+++---+++---"},
	{name: "limits/fixed-window-elastic-expiry", tool: pythonWithLimits, // INCRBY + EXPIRE, no script
		file: "python-limits.py", extra: []string{"fixed-window-elastic-expiry"},
		expect: "+++---+++---"},
	{name: "bottleneck", tool: nodeWith("bottleneck", "ioredis"), // clustering: scripts, hashes, zsets, pub/sub
		file: "bottleneck.js", expect: "+++--++-"},
	{name: "limits/moving-window", tool: pythonWithLimits,
		file: "python-limits.py", extra: []string{"moving-window"},
		shas:   []string{shaLimits28AcquireMoving, shaLimits28MovingWindow}, // over a Redis LIST
		expect: "+++---+++-+-"},
	{name: "nest-lab/throttler-storage-redis", tool: nodeWith("@nest-lab/throttler-storage-redis", "@nestjs/throttler", "@nestjs/core", "ioredis"),
		file: "nestjs-throttler.js", extra: []string{"@nest-lab/throttler-storage-redis"}, shas: []string{shaNestThrottler},
		expect: "++--++-+-"},
	{name: "nestjs-throttler-storage-redis", tool: nodeWith("nestjs-throttler-storage-redis", "@nestjs/throttler", "@nestjs/core", "ioredis"),
		file: "nestjs-throttler.js", extra: []string{"nestjs-throttler-storage-redis"}, shas: []string{shaNestThrottler},
		expect: "++--++-+-"},
	{name: "koa-ratelimit", tool: nodeWith("koa-ratelimit", "async-ratelimiter", "koa", "ioredis"),
		file: "koa-ratelimit.js", shas: []string{shaAsyncRatelimiter}, // over a sorted set
		expect: "+++-+++-++"},
}

// TestLimiterLibraries runs each scenario against redis-server and against ratchet and
// compares every decision line. A scenario whose scripts call commands Ratchet's
// keyspace does not have (lacks: COMMAND INFO answers nil for each) and that fails on
// ratchet with "Unknown Redis command called from script" is skipped naming them, after
// its redis-server run passed; any other failure or difference fails.
func TestLimiterLibraries(t *testing.T) {
	t.Parallel()
	for _, sc := range limiterScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			interp := sc.tool(t)
			redisAddr := startRedisServer(t)
			want, err := runLimiterScenario(t, interp, sc, redisAddr)
			if err != nil {
				t.Fatalf("against redis-server: %v", err)
			}
			if got := decisions(t, want); got != sc.expect {
				t.Fatalf("decisions against redis-server %q, want %q:\n%s", got, sc.expect, joinLines(want))
			}

			p := start(t, "--data-dir", "")
			got, err := runLimiterScenario(t, interp, sc, p.Addr)
			if err != nil {
				if strings.Contains(err.Error(), "Unknown Redis command called from script") && len(sc.lacks) > 0 &&
					unknownCommands(t, p, sc.lacks) {
					t.Skipf("%s's scripts call %s, which Ratchet's keyspace does not have, so it fails: %v",
						sc.name, strings.Join(sc.lacks, ", "), err)
				}
				t.Fatalf("against ratchet: %v\n--- redis-server printed ---\n%s", err, joinLines(want))
			}
			compareDecisionLines(t, want, got)
		})
	}
}

// runLimiterScenario runs clients/limiters/<file> ADDR <extra...> and returns its lines.
func runLimiterScenario(t *testing.T, interp string, sc limiterScenario, addr string) ([]map[string]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{filepath.Join(clientsDir(t), "limiters", sc.file), addr}, sc.extra...)
	cmd := exec.CommandContext(ctx, interp, args...)
	cmd.Dir = clientsDir(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n--- stdout ---\n%s--- stderr (tail) ---\n%s",
			filepath.Base(interp), strings.Join(args, " "), err, out, tail(stderr.String(), 1500))
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return nil, fmt.Errorf("%s printed %q, not a JSON object: %w", sc.file, l, err)
		}
		lines = append(lines, m)
	}
	return lines, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func joinLines(lines []map[string]any) string {
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// decisions is the column of decisions: + for allowed true or HTTP 200, - for allowed
// false or HTTP 429, one character per line that has either field.
func decisions(t *testing.T, lines []map[string]any) string {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		switch {
		case l["allowed"] == true, l["status"] == float64(200):
			b.WriteByte('+')
		case l["allowed"] == false, l["status"] == float64(429):
			b.WriteByte('-')
		case l["allowed"] != nil || l["status"] != nil:
			t.Fatalf("line %v: a decision that is neither allowed nor denied", l)
		}
	}
	return b.String()
}

// unknownCommands reports whether ratchet's COMMAND INFO answers nil for each of names:
// commands it does not have.
func unknownCommands(t *testing.T, p *proc, names []string) bool {
	t.Helper()
	c := p.client(t, &redis.Options{Protocol: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []any{"COMMAND", "INFO"}
	for _, n := range names {
		args = append(args, n)
	}
	info, err := c.Do(ctx, args...).Slice()
	if err != nil || len(info) != len(names) {
		t.Logf("COMMAND INFO %v: %v %v", names, info, err)
		return false
	}
	for i, e := range info {
		if e != nil {
			t.Logf("ratchet has %s", names[i])
			return false
		}
	}
	return true
}

// elapsedField is the time, in ms from the scenario's start, at which a line's call ended.
// It is not compared: it widens the tolerance of the timing fields.
const elapsedField = "elapsed_ms"

// Tolerances of the fields that depend on when each call ran: *_ms within a second, *_s
// (whole seconds, each side rounded on its own) within two; each widened by twice the
// largest difference so far between the two runs' elapsed_ms (a window that started at an
// earlier line and is read at this one drifts by at most the two lines' differences).
var timingTolerance = map[string]float64{"_ms": 1000, "_s": 2}

// compareDecisionLines fails t unless got has the lines of want with the same fields and
// values, timing fields within timingTolerance.
func compareDecisionLines(t *testing.T, want, got []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ratchet printed %d lines, redis-server %d\n--- redis-server ---\n%s--- ratchet ---\n%s",
			len(got), len(want), joinLines(want), joinLines(got))
	}
	var driftMs float64
	for i := range want {
		we, wok := want[i][elapsedField].(float64)
		ge, gok := got[i][elapsedField].(float64)
		if !wok || !gok {
			t.Fatalf("line %d has no %s: %v %v", i+1, elapsedField, want[i], got[i])
		}
		driftMs = max(driftMs, math.Abs(we-ge))
		if diff := lineDiff(want[i], got[i], 2*driftMs); diff != "" {
			t.Errorf("line %d: %s\n redis-server %s ratchet      %s", i+1, diff, joinLines(want[i:i+1]), joinLines(got[i:i+1]))
		}
	}
}

// lineDiff describes how got differs from want, or returns "". slackMs widens the
// tolerance of the timing fields.
func lineDiff(want, got map[string]any, slackMs float64) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diffs []string
	for _, k := range keys {
		if k == elapsedField {
			continue
		}
		w, wok := want[k]
		g, gok := got[k]
		if !wok || !gok {
			diffs = append(diffs, fmt.Sprintf("field %q only on one side", k))
			continue
		}
		if tol, ok := toleranceOf(k, slackMs); ok {
			wn, wnum := w.(float64)
			gn, gnum := g.(float64)
			if wnum && gnum && math.Abs(wn-gn) <= tol {
				continue
			}
			if w == nil && g == nil {
				continue
			}
			diffs = append(diffs, fmt.Sprintf("%s %v vs %v (tolerance %v)", k, w, g, tol))
			continue
		}
		if !reflect.DeepEqual(w, g) {
			diffs = append(diffs, fmt.Sprintf("%s %v vs %v", k, w, g))
		}
	}
	return strings.Join(diffs, "; ")
}

func toleranceOf(field string, slackMs float64) (float64, bool) {
	switch {
	case field == elapsedField:
		return 0, false
	case strings.HasSuffix(field, "_ms"):
		return timingTolerance["_ms"] + slackMs, true
	case strings.HasSuffix(field, "_s"):
		return timingTolerance["_s"] + slackMs/1000, true
	}
	return 0, false
}

// TestLimiterLineDiff checks the comparison itself: equal lines, timing within and past
// the tolerance and its slack, a changed decision, a field on one side, elapsed_ms ignored.
func TestLimiterLineDiff(t *testing.T) {
	t.Parallel()
	base := map[string]any{"op": "consume", "allowed": true, "consumed": 1.0, "before_next_ms": 60000.0,
		"reset_s": 60.0, elapsedField: 10.0}
	with := func(k string, v any) map[string]any {
		m := maps.Clone(base)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		got   map[string]any
		slack float64
		same  bool
	}{
		{maps.Clone(base), 0, true},
		{with(elapsedField, 900.0), 0, true},
		{with("before_next_ms", 59001.0), 0, true},
		{with("before_next_ms", 58999.0), 0, false},
		{with("before_next_ms", 58999.0), 2, true},
		{with("reset_s", 58.0), 0, true},
		{with("reset_s", 57.0), 0, false},
		{with("reset_s", 57.0), 1000, true},
		{with("allowed", false), 0, false},
		{with("allowed", false), 5000, false},
		{with("consumed", 2.0), 0, false},
		{with("consumed", "1"), 0, false},
		{with("consumed", nil), 0, false},
		{with("extra", 1.0), 0, false},
	} {
		if diff := lineDiff(base, tc.got, tc.slack); (diff == "") != tc.same {
			t.Errorf("lineDiff(%v, %v, %v) = %q, want same=%v", base, tc.got, tc.slack, diff, tc.same)
		}
	}
}
