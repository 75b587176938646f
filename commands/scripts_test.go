package commands_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// The SHA1s the libraries send (../shared/dropin/known_scripts.tsv).
const (
	shaAllowN       = "f52a5b566060d79fd321d695df55bc918339c4aa" // redis_rate v9.1.1–v10
	shaAllowAtMost  = "054143318f521948424aa25df61d7f7ba835a9d7"
	shaAllowN910    = "b51fcf1fec2622e401ecd1495ba719a525362891"
	shaAllowN90     = "ed56c8a55853f0875fb1b3ec6a5f0d599ae50fb7"
	shaAllowAtMost9 = "879df209aa81c6045299275bd92eddc98dc3ba7d"
	shaGCRA8        = "c63c96596849c7e5dd745dda1f81821c2f36a85d"
	shaRLFlex       = "a1de965f42e177aa339706bd580f049065eca79a"
	shaRLRedisIncr  = "81dbecea94d2d10514719b20ed51faf711529d9d"
	shaRLRedisInc42 = "b829ec02dca78a148dfc75dd3c86f488ed007c68"
	shaRLRedisInc3  = "3f424a504987d231baa2e19159bb5def8ad32f87"
	shaRLRedisGet   = "6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a"
	shaLimitsFixed  = "628bd136a573a06b346879695681af12ccef300f"
	shaLimitsSlide  = "e8ac2a60cb040b0dbb56815a1e9c6fd032ce62e7"
	shaLimitsRead   = "e7a0a27d4101baabb124af209bb0245197a359a1"
	shaUluleIncr    = "f74233f556d3f99c50b61169cf8aa8d5deb63fb2"
	shaUlulePeek    = "566f5c6a17e5fddb9a10bf389f754edd0d899c61"
	shaSpring       = "0ad5736ed1c04aae6ec194376c784b89b8c08a7a"
	shaSpring40     = "775635cca91092477cbcee85fd800accb6adc4b2"
	shaSpring306    = "76a566c51f92d8f643d16e0ef0101663d5380dba"
	shaSpring22     = "9d491aea731237273f4274f9ed9660b432b23791"
)

// vectorMs is the instant of redis7_reply_vectors.txt's recording, to the second
// (TIME 1795352399): redis_rate's now is then 312123599 s after 2017-01-01.
const vectorMs = 1795352399_000

func newScriptRig() *rig {
	r := newRig("")
	r.clock.Set(vectorMs)
	return r
}

// argsRun serves each request (separate arguments: some are empty) and compares replies.
func argsRun(t *testing.T, r *rig, steps []struct {
	args []string
	want string
}) {
	t.Helper()
	for _, s := range steps {
		if got := r.doArgs(s.args...); got != s.want {
			t.Errorf("%q:\n got %q\nwant %q", s.args, got, s.want)
		}
	}
}

// TestScriptLookup: known SHA1s always exist, unknown ones answer NOSCRIPT, numkeys errors
// are Redis's and come before the lookup, SCRIPT's subcommands.
func TestScriptLookup(t *testing.T) {
	r := newScriptRig()
	all := []string{shaAllowN, shaAllowAtMost, shaAllowN910, shaAllowN90, shaAllowAtMost9, shaGCRA8, shaRLFlex,
		shaRLRedisIncr, shaRLRedisInc42, shaRLRedisInc3, shaRLRedisGet, shaLimitsFixed, shaLimitsSlide, shaLimitsRead,
		shaUluleIncr, shaUlulePeek, shaSpring, shaSpring40, shaSpring306, shaSpring22}
	want := "*" + strconv.Itoa(len(all)+2) + "\r\n" + strings.Repeat(":1\r\n", len(all)) + ":0\r\n:1\r\n"
	if got := r.do("SCRIPT EXISTS " + strings.Join(all, " ") + " 0000000000000000000000000000000000000000 " +
		strings.ToUpper(shaAllowN)); got != want {
		t.Errorf("SCRIPT EXISTS:\n got %q\nwant %q", got, want)
	}
	r.run(t, []step{
		{"EVALSHA 0000000000000000000000000000000000000000 0", "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{"EVALSHA abc 1 k", "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{"EVALSHA " + shaAllowN + " 2 k", "-ERR Number of keys can't be greater than number of args\r\n"},
		{"EVALSHA 0000000000000000000000000000000000000000 -1", "-ERR Number of keys can't be negative\r\n"},
		{"EVALSHA " + shaAllowN + " x k", "-ERR value is not an integer or out of range\r\n"},
		// Other scripts run on the interpreter (redis-server's replies).
		{"EVAL return 0", "$-1\r\n"},
		{"EVAL return 5", "-ERR Number of keys can't be greater than number of args\r\n"},
		{"SCRIPT LOAD return", "$40\r\n63143b6f8007b98c53ca2149822777b3566f9241\r\n"},
		{"SCRIPT EXISTS 63143B6F8007B98C53CA2149822777B3566F9241", "*1\r\n:1\r\n"},
		{"EVALSHA 63143b6f8007b98c53ca2149822777b3566f9241 0", "$-1\r\n"},
		{"SCRIPT KILL", "-NOTBUSY No scripts in execution right now.\r\n"},
		{"SCRIPT FLUSH", "+OK\r\n"},
		{"EVALSHA 63143b6f8007b98c53ca2149822777b3566f9241 0", "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{"SCRIPT FLUSH ASYNC", "+OK\r\n"},
		{"SCRIPT FLUSH now", "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"},
		{"SCRIPT EXISTS " + shaAllowN, "*1\r\n:1\r\n"}, // FLUSH forgets no known script
		{"SCRIPT KILL", "-NOTBUSY No scripts in execution right now.\r\n"},
		{"SCRIPT NOPE", "-ERR unknown subcommand or wrong number of arguments for 'NOPE'. Try SCRIPT HELP.\r\n"},
		{"SCRIPT EXISTS", "-ERR unknown subcommand or wrong number of arguments for 'EXISTS'. Try SCRIPT HELP.\r\n"},
		{"EVALSHA " + shaAllowN, "-ERR wrong number of arguments for 'evalsha' command\r\n"},
	})
}

// TestScriptRedisRate: allowN and allowAtMost on the recording's instant. The replies at
// that instant with a fresh key are redis7_reply_vectors.txt's bytes (EVAL #1, the cost-0
// peek, allowAtMost n=5); the others are the script's arithmetic at whole milliseconds,
// where every value is exact.
func TestScriptRedisRate(t *testing.T) {
	r := newScriptRig()
	allow := "EVALSHA " + shaAllowN + " 1 rate:k 2 2 1 "
	r.run(t, []step{
		{allow + "1", "*4\r\n:1\r\n:1\r\n$2\r\n-1\r\n$3\r\n0.5\r\n"},
		{allow + "1", "*4\r\n:1\r\n:0\r\n$2\r\n-1\r\n$1\r\n1\r\n"},
		{"GET rate:k", "$9\r\n312123600\r\n"},
		{"PTTL rate:k", ":1000\r\n"},
	})
	r.clock.Advance(250)
	r.run(t, []step{
		{allow + "1", "*4\r\n:0\r\n:0\r\n$4\r\n0.25\r\n$4\r\n0.75\r\n"},
		{"PTTL rate:k", ":750\r\n"},
	})
	r.clock.Advance(250) // one token back: remaining 0.0 after taking it
	r.run(t, []step{
		{allow + "1", "*4\r\n:1\r\n:0\r\n$2\r\n-1\r\n$1\r\n1\r\n"},
		{"GET rate:k", "$11\r\n312123600.5\r\n"},
	})
	r.clock.Advance(1100) // TAT passed: the key expired (SET EX 1 at +500 ms)
	r.run(t, []step{
		{"EXISTS rate:k", ":0\r\n"},
		{"EVALSHA " + shaAllowN + " 1 rate:p 2 2 1 0", "*4\r\n:0\r\n:2\r\n$2\r\n-1\r\n$1\r\n0\r\n"}, // vector: cost 0
		{"EXISTS rate:p", ":0\r\n"}, // reset_after 0: no SET
		{"EVALSHA " + shaAllowAtMost + " 1 rate:m 2 2 1 5", "*4\r\n:2\r\n:0\r\n$2\r\n-1\r\n$1\r\n1\r\n"}, // vector
		{"EVALSHA " + shaAllowAtMost + " 1 rate:m 2 2 1 5", "*4\r\n:0\r\n:0\r\n$3\r\n0.5\r\n$1\r\n1\r\n"},
		// PerMinute(10) as redis_rate sends it: period "60", remaining truncated (9.0 -> 9).
		{"EVALSHA " + shaAllowN + " 1 rate:min 10 10 60 1", "*4\r\n:1\r\n:9\r\n$2\r\n-1\r\n$1\r\n6\r\n"},
		{"TTL rate:min", ":6\r\n"},
		{"EVALSHA " + shaAllowN + " 1 rate:min 10 10 60 1", "*4\r\n:1\r\n:8\r\n$2\r\n-1\r\n$2\r\n12\r\n"},
		{"EVALSHA " + shaAllowN90 + " 1 rate:min9 10 10 60 1", "*4\r\n:1\r\n:9\r\n$2\r\n-1\r\n$1\r\n6\r\n"},
		{"EVALSHA " + shaAllowN90 + " 1 rate:min9 10 10 60 1", "*4\r\n:1\r\n:8\r\n$2\r\n-1\r\n$2\r\n12\r\n"},
	})
	// 4 s on, remaining is 46/6 = 7.67: 7 as Redis converts the Lua number, 8 where v9.0
	// rounds it.
	r.clock.Advance(4000)
	r.run(t, []step{
		{"EVALSHA " + shaAllowN + " 1 rate:min 10 10 60 1", "*4\r\n:1\r\n:7\r\n$2\r\n-1\r\n$2\r\n14\r\n"},
		{"EVALSHA " + shaAllowN90 + " 1 rate:min9 10 10 60 1", "*4\r\n:1\r\n:8\r\n$2\r\n-1\r\n$2\r\n14\r\n"},
		// v9.1.0 always SETs: a cost-0 peek of a fresh key is Redis's error for EX 0.
		{"EVALSHA " + shaAllowN910 + " 1 rate:q 2 2 1 0", "-ERR invalid expire time in 'set' command script: " + shaAllowN910 + ", on @user_script:54.\r\n"},
		// v8 answers "limited" (0 when allowed) and rounds remaining.
		{"EVALSHA " + shaGCRA8 + " 1 rate:v8 2 2 1 1", "*4\r\n:0\r\n:1\r\n$2\r\n-1\r\n$3\r\n0.5\r\n"},
		{"EVALSHA " + shaAllowN90 + " 1 rate:v9 2 2 1 1", "*4\r\n:1\r\n:1\r\n$2\r\n-1\r\n$3\r\n0.5\r\n"},
		// Errors as Redis words them: a missing key, a TAT that is not a number, arguments.
		{"EVALSHA " + shaAllowN + " 0 2 2 1 1", "-ERR Lua redis lib command arguments must be strings or integers script: " + shaAllowN + ", on @user_script:26.\r\n"},
		{"SET rate:bad x", "+OK\r\n"},
		{"EVALSHA " + shaAllowN + " 1 rate:bad 2 2 1 1", "-ERR user_script:34: bad argument #1 to 'max' (number expected, got nil) script: " + shaAllowN + ", on @user_script:34.\r\n"},
		{"EVALSHA " + shaAllowN + " 1 rate:k 2 x 1 1", "-ERR user_script:11: attempt to perform arithmetic on a nil value script: " + shaAllowN + ", on @user_script:11.\r\n"},
		{"EVALSHA_RO " + shaAllowN + " 1 rate:ro 2 2 1 1", "-ERR Write commands are not allowed from read-only scripts. script: " + shaAllowN + ", on @user_script:55.\r\n"},
		{"EXISTS rate:ro", ":0\r\n"},
	})
}

// TestScriptCounters: rate-limiter-flexible, rate-limit-redis, limits and ulule/limiter
// reproduce redis7_reply_vectors.txt's bytes, then the keys as the libraries read them.
func TestScriptCounters(t *testing.T) {
	r := newScriptRig()
	r.run(t, []step{
		// rate-limiter-flexible: points secDuration limitPoints durationSec.
		{"EVALSHA " + shaRLFlex + " 1 rlflx:k 1 60 5 60", "*2\r\n:1\r\n:60000\r\n"},
		{"EVALSHA " + shaRLFlex + " 1 rlflx:k 1 60 5 60", "*2\r\n:2\r\n:60000\r\n"},
		{"MULTI", "+OK\r\n"}, {"GET rlflx:k", "+QUEUED\r\n"}, {"PTTL rlflx:k", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n$1\r\n2\r\n:60000\r\n"},
		{"SET rlflx:f 3", "+OK\r\n"}, // a key without TTL gets one: ttl = 1000 * secDuration
		{"EVALSHA " + shaRLFlex + " 1 rlflx:f 2 30 5 30", "*2\r\n:5\r\n:30000\r\n"},
		{"TTL rlflx:f", ":30\r\n"},
		{"EVALSHA " + shaRLFlex + " 1 rlflx:e 1 0 5 0", "-ERR invalid expire time in 'set' command script: " + shaRLFlex + ", on @user_script:1.\r\n"},
		// rate-limit-redis v4.2.3+: resetOnChange windowMs; get; DECR.
		{"EVALSHA " + shaRLRedisIncr + " 1 rl:k 0 60000", "*2\r\n:1\r\n:60000\r\n"},
		{"EVALSHA " + shaRLRedisIncr + " 1 rl:k 0 60000", "*2\r\n:2\r\n:60000\r\n"},
		{"EVALSHA " + shaRLRedisGet + " 1 rl:k", "*2\r\n$1\r\n2\r\n:60000\r\n"},
		{"EVALSHA " + shaRLRedisGet + " 1 rl:none", "*2\r\n$-1\r\n:-2\r\n"},
		{"DECR rl:k", ":1\r\n"},
		// limits fixed window: expiry amount, then GET and TTL.
		{"EVALSHA " + shaLimitsFixed + " 1 LIMITS:k 60 1", ":1\r\n"},
		{"GET LIMITS:k", "$1\r\n1\r\n"},
		{"TTL LIMITS:k", ":60\r\n"},
		// limits sliding window: KEYS previous, current; ARGV limit expiry amount.
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1", ":1\r\n"},
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1", ":1\r\n"},
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1", "$-1\r\n"},
		// ulule/limiter: count period_ms; peek.
		{"EVALSHA " + shaUluleIncr + " 1 limiter:k 1 60000", "*2\r\n:1\r\n:60000\r\n"},
		{"EVALSHA " + shaUluleIncr + " 1 limiter:k 1 60000", "*2\r\n:2\r\n:60000\r\n"},
		{"EVALSHA " + shaUlulePeek + " 1 limiter:k", "*2\r\n:2\r\n:60000\r\n"},
		{"EVALSHA " + shaUlulePeek + " 1 limiter:none", "*2\r\n:0\r\n:0\r\n"},
	})
	r.clock.Advance(1)
	r.run(t, []step{
		{"EVALSHA " + shaLimitsRead + " 2 LIMITS:{s}/-1 LIMITS:{s} 60", "*4\r\n$-1\r\n:-2\r\n$1\r\n2\r\n:119999\r\n"},
	})
	// 61 s on, the current window (TTL 58999 ms < 60 s) becomes the previous one: 2 hits
	// weigh floor(2*58999/60000) = 1, so one more hit is allowed, not two.
	r.clock.Advance(61_000)
	r.run(t, []step{
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1", ":1\r\n"},
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1", "$-1\r\n"},
		{"EVALSHA " + shaLimitsRead + " 2 LIMITS:{s}/-1 LIMITS:{s} 60", "*4\r\n$1\r\n2\r\n:58999\r\n$1\r\n1\r\n:118999\r\n"},
		{"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 5 60 6", "$-1\r\n"}, // amount > limit
		// The fixed windows expired: a new one starts.
		{"EVALSHA " + shaRLRedisIncr + " 1 rl:k 0 60000", "*2\r\n:1\r\n:60000\r\n"},
		{"EVALSHA " + shaUluleIncr + " 1 limiter:k 1 60000", "*2\r\n:1\r\n:60000\r\n"},
		{"EVALSHA " + shaLimitsFixed + " 1 LIMITS:k 60 1", ":1\r\n"},
		// Older rate-limit-redis increments: INCR first, PEXPIRE when no TTL (or reset).
		{"EVALSHA " + shaRLRedisInc3 + " 1 rl:o 0 1000", "*2\r\n:1\r\n:1000\r\n"},
		{"EVALSHA " + shaRLRedisInc42 + " 1 rl:o 0 1000", "*2\r\n:2\r\n:1000\r\n"},
		{"EVALSHA " + shaRLRedisInc42 + " 1 rl:o 1 5000", "*2\r\n:3\r\n:5000\r\n"},
		{"PTTL rl:o", ":5000\r\n"},
		{"EVALSHA " + shaRLRedisIncr + " 1 rl:o 1 7000", "*2\r\n:4\r\n:7000\r\n"},
		{"PTTL rl:o", ":7000\r\n"},
		{"SET limiter:x abc", "+OK\r\n"},
		{"EVALSHA " + shaUlulePeek + " 1 limiter:x", "*0\r\n"}, // {tonumber("abc"), ttl} ends at the nil
		{"EVALSHA " + shaUluleIncr + " 1 limiter:x 1 60000", "-ERR value is not an integer or out of range script: " + shaUluleIncr + ", on @user_script:5.\r\n"},
		{"EVALSHA_RO " + shaUlulePeek + " 1 limiter:k", "*2\r\n:1\r\n:60000\r\n"},
		{"EVAL_RO x 0", "-ERR Error compiling script (new function): user_script:1: parse error near '<eof>'\r\n"}, // Redis: '=' expected
	})
}

// TestScriptSpring: the token bucket with the server's clock (ARGV[3] ""), as
// redis7_reply_vectors.txt recorded it at TIME 1795352399: rate 1, capacity 2.
func TestScriptSpring(t *testing.T) {
	r := newScriptRig()
	keys := []string{"2", "request_rate_limiter.{r.id}.tokens", "request_rate_limiter.{r.id}.timestamp"}
	call := func(sha string, argv ...string) []string {
		return append(append([]string{"EVALSHA", sha}, keys...), argv...)
	}
	type st = struct {
		args []string
		want string
	}
	argsRun(t, r, []st{
		{call(shaSpring, "1", "2", "", "1"), "*2\r\n:1\r\n:1\r\n"},
		{call(shaSpring, "1", "2", "", "1"), "*2\r\n:1\r\n:0\r\n"},
		{call(shaSpring, "1", "2", "", "1"), "*2\r\n:0\r\n:0\r\n"},
		{[]string{"GET", keys[1]}, "$1\r\n0\r\n"},
		{[]string{"GET", keys[2]}, "$10\r\n1795352399\r\n"},
		{[]string{"TTL", keys[1]}, ":4\r\n"},
	})
	r.clock.Advance(999) // the same second: nothing refilled
	argsRun(t, r, []st{{call(shaSpring40, "1", "2", "", "1"), "*2\r\n:0\r\n:0\r\n"}})
	r.clock.Advance(1) // one second later: one token back
	argsRun(t, r, []st{
		{call(shaSpring306, "1", "2", "123", "1"), "*2\r\n:1\r\n:0\r\n"}, // v3.0.6 ignores ARGV[3]
		// v2.2 uses the client's clock: 10 s later refills to capacity.
		{call(shaSpring22, "1", "2", "1795352410", "1"), "*2\r\n:1\r\n:1\r\n"},
		{[]string{"GET", keys[2]}, "$10\r\n1795352410\r\n"},
		{call(shaSpring, "1", "2", "", "5"), "*2\r\n:0\r\n:1\r\n"}, // more than the capacity
		{call(shaSpring22, "1", "2", "", "1"), "-ERR user_script:32: attempt to perform arithmetic on a nil value script: " + shaSpring22 + ", on @user_script:32.\r\n"},
		{[]string{"EVALSHA", shaSpring, "1", keys[1], "1", "2", "", "1"}, "-ERR Lua redis lib command arguments must be strings or integers script: " + shaSpring + ", on @user_script:15.\r\n"},
	})
}

// TestScriptMulti: EVALSHA queues inside MULTI and runs at EXEC with the other counter
// commands; the second script's TIME is a microsecond after the first's (Redis's TIME
// moves between the scripts of a MULTI), so its retry_after is just under 1 s; RESP3
// nulls for Lua false.
func TestScriptMulti(t *testing.T) {
	r := newScriptRig()
	allow := "EVALSHA " + shaAllowN + " 1 rate:t 1 1 1 1"
	r.run(t, []step{
		{"MULTI", "+OK\r\n"},
		{allow, "+QUEUED\r\n"},
		{allow, "+QUEUED\r\n"},
		{"EVALSHA 0000000000000000000000000000000000000000 0", "+QUEUED\r\n"},
		{"GET rate:t", "+QUEUED\r\n"},
		{"EXEC", "*4\r\n*4\r\n:1\r\n:0\r\n$2\r\n-1\r\n$1\r\n1\r\n*4\r\n:0\r\n:0\r\n$16\r\n0.99999898672104\r\n$16\r\n0.99999898672104\r\n" +
			"-NOSCRIPT No matching script. Please use EVAL.\r\n$9\r\n312123600\r\n"},
	})
	r.do("HELLO 3")
	r.run(t, []step{
		{"EVALSHA " + shaLimitsSlide + " 2 p c 0 60 1", "_\r\n"},
		{"EVALSHA " + shaRLRedisGet + " 1 rl:none", "*2\r\n_\r\n:-2\r\n"},
	})
}

// scriptFuzzSHAs are the SHA1s FuzzScripts calls; the last is unknown.
var scriptFuzzSHAs = []string{shaAllowN, shaAllowAtMost, shaAllowN910, shaAllowN90, shaAllowAtMost9, shaGCRA8, shaRLFlex,
	shaRLRedisIncr, shaRLRedisInc42, shaRLRedisInc3, shaRLRedisGet, shaLimitsFixed, shaLimitsSlide, shaLimitsRead,
	shaUluleIncr, shaUlulePeek, shaSpring, shaSpring40, shaSpring306, shaSpring22, "0000000000000000000000000000000000000000"}

// FuzzScripts runs any arguments through the known scripts (EVALSHA and EVALSHA_RO, alone
// and inside MULTI/EXEC) and EVAL/SCRIPT LOAD of any text: every request gets exactly one
// well-formed reply (EXEC: an array of one), nothing panics, and the keys stay in bounds.
func FuzzScripts(f *testing.F) {
	seeds := []struct {
		which uint8
		args  string
	}{
		{0, "1 rate:k 2 2 1 1"}, {1, "1 rate:k 10 10 60 5"}, {2, "1 rate:k 2 2 1 0"}, {5, "1 rate:k 1 1 0 1"},
		{0, "1 rate:k 0 0 0 0"}, {0, "1 rate:k inf nan -1 1e308"}, {0, "1 rate:k 0x10 1 1 -5"}, {1, "1 rate:k 1 1 1 abc"},
		{6, "1 rlflx:k 1 60 5 60"}, {6, "1 rlflx:k 9223372036854775807 1"}, {6, "1 rlflx:k 1 -1"}, {7, "1 rl:k 1 60000"},
		{7, "1 rl:k 0 1.5"}, {9, "1 rl:k 0 0"}, {10, "1 rl:k"}, {11, "1 LIMITS:k 60 1"}, {11, "1 LIMITS:k 0 1e300"},
		{12, "2 p c 2 60 1"}, {12, "2 c c 2 0.001 1"}, {13, "2 p c 60"}, {13, "1 p 60"}, {14, "1 l:k 1 60000"},
		{14, "1 l:k 1.5 1"}, {15, "1 l:k"}, {16, "2 t s 1 2  1"}, {16, "2 t s 0 0  1"}, {19, "2 t s 1 2 nan 1"},
		{20, "0"}, {3, "-1"}, {3, "99 k"}, {0, "0"}, {128, "return 1"},
	}
	for _, s := range seeds {
		f.Add(s.which, s.args)
	}
	clock := engine.NewManualClock(vectorMs)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 64 << 10})
	d := commands.New(commands.Options{Origin: eng, Host: &fakeHost{}, Role: "origin"})
	s := commands.NewSession(1, "127.0.0.1:5000", "127.0.0.1:6380", 0)
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		clock.Advance(int64(which) * 37)
		var req [][]byte
		switch {
		case which >= 128 && which&1 == 0:
			req = [][]byte{[]byte("EVAL"), []byte(args), []byte("0")}
		case which >= 128:
			req = [][]byte{[]byte("SCRIPT"), []byte("LOAD"), []byte(args)}
		default:
			name := "EVALSHA"
			if which >= 64 {
				name = "EVALSHA_RO"
			}
			req = [][]byte{[]byte(name), []byte(scriptFuzzSHAs[int(which)%len(scriptFuzzSHAs)])}
			for _, a := range strings.Split(args, " ") {
				req = append(req, []byte(a))
			}
		}
		checkServedAloneAndInMulti(t, d, s, req)
		if st := eng.Stats(); st.MemoryBytes < 0 || st.MemoryBytes > st.MaxMemoryBytes+keyspace.MaxValue+4096 {
			t.Fatalf("memory gauge %d of %d", st.MemoryBytes, st.MaxMemoryBytes)
		}
	})
}

// TestScriptWarmAllocations keeps a warm EVALSHA of each library at one allocation per
// request: the kvReq's closure, as INCRBY's. (The scriptRun and the numbers a script
// formats stay on the stack.) Not under -race: keyspace.KV.Do's sync.Pool then drops items.
// Served as an event loop serves them too (NoWait), where a script for the interpreter is
// sent aside and a known one is not: parsed once.
func TestScriptWarmAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts")
	}
	for _, noWait := range []bool{false, true} {
		r := newScriptRig()
		r.s.NoWait = noWait
		scriptWarmAllocations(t, r)
	}
}

func scriptWarmAllocations(t *testing.T, r *rig) {
	for _, cmd := range []string{
		"EVALSHA " + shaAllowN + " 1 rate:k 1000000 1000000 1 1",
		"EVALSHA " + shaAllowAtMost + " 1 rate:m 1000000 1000000 1 1",
		"EVALSHA " + shaSpring + " 2 t s 1000000 1000000 1795352399 1",
		"EVALSHA " + shaRLFlex + " 1 rlflx:k 1 60 5 60",
		"EVALSHA " + shaRLRedisIncr + " 1 rl:k 1 60000",
		"EVALSHA " + shaLimitsFixed + " 1 LIMITS:k 60 1",
		"EVALSHA " + shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 1000000 60 1",
		"EVALSHA " + shaUluleIncr + " 1 limiter:k 1 60000",
		"EVALSHA " + shaUlulePeek + " 1 limiter:k",
	} {
		var w resp.Writer
		args := split(cmd)
		r.d.Serve(r.s, &w, args)
		if allocs := testing.AllocsPerRun(100, func() {
			w.Reset()
			r.d.Serve(r.s, &w, args)
		}); allocs > 1 || r.s.WouldBlock {
			t.Errorf("%s (NoWait %v): %v allocations per request, want at most 1; sent aside: %v", cmd, r.s.NoWait, allocs,
				r.s.WouldBlock)
		}
	}
}
