package commands_test

import (
	"strconv"
	"strings"
	"testing"
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
		{"EVAL return 0", "-ERR Ratchet runs no Lua; this script is not one it knows (supported: go-redis/redis_rate, " +
			"rate-limiter-flexible, rate-limit-redis, limits, ulule/limiter, Spring Cloud Gateway); see the README\r\n"},
		{"EVAL return 5", "-ERR Number of keys can't be greater than number of args\r\n"},
		{"SCRIPT LOAD return", "-ERR Ratchet runs no Lua; this script is not one it knows (supported: go-redis/redis_rate, " +
			"rate-limiter-flexible, rate-limit-redis, limits, ulule/limiter, Spring Cloud Gateway); see the README\r\n"},
		{"SCRIPT FLUSH", "+OK\r\n"},
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
