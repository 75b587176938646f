package integration

// The wire traffic of the limiter scripts whose libraries cannot run here (limits' sliding
// window, which Debian's limits 2.8.0 lacks; Spring Cloud Gateway, a JVM library; the
// older redis_rate and allowAtMost), replayed as each library sends it (known_scripts.tsv:
// KEYS and ARGV) to redis-server running the real Lua text and to the binary, reply by
// reply.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/commands"
)

// replayStep is one request; afterMs is a pause before it (windows pass); aligned waits
// first for 50 ms past a whole second, so that steps on a whole-second clock (Spring's
// TIME[1]) run on both servers within the same second.
type replayStep struct {
	afterMs int
	aligned bool
	args    []string
}

// evalsha is a replay step running script sha with keys then args.
func evalsha(sha string, keys []string, args ...string) replayStep {
	a := append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...)
	return replayStep{args: append(a, args...)}
}

func repeat(n int, s replayStep) []replayStep {
	out := make([]replayStep, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func after(ms int, s replayStep) replayStep { s.afterMs = ms; return s }

func cmd(args ...string) replayStep { return replayStep{args: args} }

// replayScenarios: per library, the requests it sends. Periods are short (2 s) where the
// scenario lets a window pass.
func replayScenarios() map[string][]replayStep {
	const (
		limitsAcquire = "e8ac2a60cb040b0dbb56815a1e9c6fd032ce62e7"
		limitsRead    = "e7a0a27d4101baabb124af209bb0245197a359a1"
		limitsFixed   = "628bd136a573a06b346879695681af12ccef300f"
	)
	sliding := []string{"LIMITS:{api/1/2/second}/-1", "LIMITS:{api/1/2/second}"}
	sc := map[string][]replayStep{}
	// limits' sliding window counter (4.1+): 3 per 2 s, the read, a window later.
	s := repeat(4, evalsha(limitsAcquire, sliding, "3", "2", "1"))
	s = append(s, evalsha(limitsRead, sliding, "2"), cmd("GET", sliding[1]))
	s = append(s, after(2100, evalsha(limitsAcquire, sliding, "3", "2", "1")), evalsha(limitsRead, sliding, "2"))
	s = append(s, evalsha(limitsAcquire, sliding, "3", "2", "2"), evalsha(limitsAcquire, sliding, "3", "2", "1"))
	sc["limits sliding window"] = s
	fixed := []string{"LIMITS:LIMITER/api/3/1/second"}
	s = repeat(4, evalsha(limitsFixed, fixed, "2", "1"))
	sc["limits fixed window"] = append(s, cmd("GET", fixed[0]), cmd("TTL", fixed[0]), evalsha(limitsFixed, fixed, "2", "5"))

	// Spring Cloud Gateway: replenishRate 1/s, burstCapacity 3, the server's clock ("")
	// from v3.0.6, the client's (ARGV[3] epoch seconds) before.
	for _, sha := range []string{"0ad5736ed1c04aae6ec194376c784b89b8c08a7a", "775635cca91092477cbcee85fd800accb6adc4b2",
		"76a566c51f92d8f643d16e0ef0101663d5380dba"} {
		// Keys of their own: the scenarios run in parallel on the same two servers.
		id := "request_rate_limiter.{route." + sha[:8] + "}"
		keys := []string{id + ".tokens", id + ".timestamp"}
		s := repeat(5, evalsha(sha, keys, "1", "3", "", "1"))
		s[0].aligned = true
		s = append(s, evalsha(sha, keys, "1", "3", "", "4"), cmd("GET", keys[0]), cmd("TTL", keys[0]))
		sc["spring "+sha[:8]] = append(s, after(1100, evalsha(sha, keys, "1", "3", "", "1")))
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	keys := []string{"request_rate_limiter.{old}.tokens", "request_rate_limiter.{old}.timestamp"}
	sc["spring 9d491aea"] = repeat(5, evalsha("9d491aea731237273f4274f9ed9660b432b23791", keys, "1", "3", now, "1"))

	// redis_rate: allowAtMost and the older generations' allowN, 3 per minute, burst 3.
	for _, sha := range []string{"054143318f521948424aa25df61d7f7ba835a9d7", "a6aad3b47e739a75dad60abfc23778c5cf863397",
		"879df209aa81c6045299275bd92eddc98dc3ba7d", "b51fcf1fec2622e401ecd1495ba719a525362891",
		"ed56c8a55853f0875fb1b3ec6a5f0d599ae50fb7", "c63c96596849c7e5dd745dda1f81821c2f36a85d"} {
		key := []string{"rate:" + sha[:8]}
		s := []replayStep{evalsha(sha, key, "3", "3", "60", "2"), evalsha(sha, key, "3", "3", "60", "2"),
			evalsha(sha, key, "3", "3", "60", "1"), evalsha(sha, key, "3", "3", "60", "0"), cmd("TTL", key[0])}
		sc["redis_rate "+sha[:8]] = s
	}
	return sc
}

// TestScriptWireReplay: every scenario's replies on the binary equal redis-server's,
// except for what depends on when each server ran it: integers of 4 digits or more (ms)
// within 100, decimals within 0.01 (redis_rate's seconds), epoch seconds within 2, each
// plus the drift the test measured (see replay). A scenario that differs otherwise after
// a step whose run straddled a whole second, or drifted more than 100 ms, proves nothing
// (on a loaded machine the two servers can run one step that far apart) and runs again
// on keys of its own, up to three times.
func TestScriptWireReplay(t *testing.T) {
	redisAddr := startRedisServer(t)
	p := start(t, "--data-dir", "")
	texts := map[string]string{}
	for _, s := range commands.KnownScripts() {
		texts[s.SHA1] = s.Text
	}
	for name, steps := range replayScenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; ; attempt++ {
				rc, rt := dialRaw(t, redisAddr), dialRaw(t, p.Addr)
				diffs, inconclusive := replay(t, rc, rt, texts, keysOfAttempt(steps, attempt))
				switch {
				case len(diffs) == 0:
					return
				case !inconclusive:
					t.Fatal(strings.Join(diffs, "\n"))
				case attempt == 3:
					t.Skipf("three attempts ran a step too far apart on the two servers (a loaded machine):\n%s", strings.Join(diffs, "\n"))
				}
				t.Logf("attempt %d ran a step too far apart on the two servers (a loaded machine); again on new keys:\n%s",
					attempt, strings.Join(diffs, "\n"))
			}
		})
	}
}

// replay runs steps on redis-server (rc) and the binary (rt) and returns how their
// replies differ; inconclusive when a step up to the first difference straddled a whole
// second or drifted more than 100 ms. The two servers run a step within its span (from
// the first request sent to the second reply read), and a value that also depends on the
// time of an earlier step (a TAT, a window's start) within that span plus the longest one
// before: that sum is the step's drift, which sameReply allows beyond its tolerances.
func replay(t *testing.T, rc, rt *rawConn, texts map[string]string, steps []replayStep) (diffs []string, inconclusive bool) {
	for _, st := range steps {
		if st.args[0] == "EVALSHA" {
			text, ok := texts[st.args[1]]
			if !ok {
				t.Fatalf("%s is not a known script", st.args[1])
			}
			rc.send("SCRIPT", "LOAD", text)
			if got := rawReply(t, rc); !strings.Contains(got, st.args[1]) {
				t.Fatalf("SCRIPT LOAD on redis-server answered %q, want %s", got, st.args[1])
			}
		}
	}
	var longest time.Duration // the longest span of a step so far
	for i, st := range steps {
		if st.aligned {
			now := time.Now()
			time.Sleep(now.Truncate(time.Second).Add(time.Second + 50*time.Millisecond).Sub(now))
		}
		time.Sleep(time.Duration(st.afterMs) * time.Millisecond)
		began := time.Now()
		rc.send(st.args...)
		rt.send(st.args...)
		want, got := rawReply(t, rc), rawReply(t, rt)
		ended := time.Now()
		span := ended.Sub(began)
		longest = max(longest, span)
		drift := span + longest
		if began.Unix() != ended.Unix() || drift > 100*time.Millisecond {
			inconclusive = inconclusive || len(diffs) == 0
		}
		if !sameReply(want, got, drift) {
			diffs = append(diffs, fmt.Sprintf("step %d %q (drift %v):\n redis-server %q\n ratchet      %q", i, st.args, drift, want, got))
		}
	}
	return diffs, inconclusive
}

// keysOfAttempt returns steps with their keys (EVALSHA's KEYS, GET's and TTL's key)
// suffixed by the attempt number after the first, so that a new attempt starts afresh.
func keysOfAttempt(steps []replayStep, attempt int) []replayStep {
	if attempt == 1 {
		return steps
	}
	out := make([]replayStep, len(steps))
	for i, st := range steps {
		args := append([]string(nil), st.args...)
		first, last := 1, 2
		if args[0] == "EVALSHA" {
			n, _ := strconv.Atoi(args[2])
			first, last = 3, 3+n
		}
		for k := first; k < last && k < len(args); k++ {
			args[k] += fmt.Sprintf("#%d", attempt)
		}
		st.args = args
		out[i] = st
	}
	return out
}

// sameReply compares two raw replies token by token (bulk lengths aside), with the
// tolerances of TestScriptWireReplay plus drift.
func sameReply(a, b string, drift time.Duration) bool {
	if a == b {
		return true
	}
	ta, tb := replyTokens(a), replyTokens(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		x, y := ta[i], tb[i]
		if x == y {
			continue
		}
		if x[0] != y[0] {
			return false
		}
		if x[0] == ':' {
			u, err1 := strconv.ParseInt(x[1:], 10, 64)
			v, err2 := strconv.ParseInt(y[1:], 10, 64)
			if err1 != nil || err2 != nil || abs64(u-v) > 100+drift.Milliseconds() || max(abs64(u), abs64(v)) < 1000 {
				return false
			}
			continue
		}
		u, err1 := strconv.ParseFloat(x[1:], 64)
		v, err2 := strconv.ParseFloat(y[1:], 64)
		tol := 0.01
		if math.Abs(u) > 1e8 {
			tol = 2
		}
		if err1 != nil || err2 != nil || math.Abs(u-v) > tol+drift.Seconds() {
			return false
		}
	}
	return true
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// replyTokens splits a raw reply into its lines, a bulk string's payload marked with '='
// and its length line dropped.
func replyTokens(r string) []string {
	var out []string
	lines := strings.Split(strings.TrimSuffix(r, "\r\n"), "\r\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if len(l) > 1 && l[0] == '$' && l != "$-1" && i+1 < len(lines) {
			out = append(out, "="+lines[i+1])
			i++
			continue
		}
		out = append(out, l)
	}
	return out
}
