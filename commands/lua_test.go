package commands_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
)

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestLuaFallback: a script without a native path runs on the interpreter over the counter
// keyspace, with redis-server's replies (steps 1-3, 6-8, 10), and the limits of running it
// on the EVAL's KEYS: an undeclared key, a command the keyspace does not have.
func TestLuaFallback(t *testing.T) {
	r := newScriptRig()
	window := "local n = redis.call('incr', KEYS[1]) if n == 1 then redis.call('pexpire', KEYS[1], ARGV[1]) end " +
		"return {n, redis.call('pttl', KEYS[1])}"
	tail := func(script string, line string) string {
		return " script: " + sha1Hex(script) + ", on @user_script:" + line + ".\r\n"
	}
	get, incrRO := "return redis.call('get', KEYS[1])", "return redis.call('incr', KEYS[1])"
	arity, other := "return redis.call('incr', KEYS[1], 'x')", "return redis.call('get', 'other')"
	unknown, swapped := "return redis.call('xadd', KEYS[1], '*', 'a', 1)", "return redis.call('del', KEYS[2], KEYS[1])"
	pcall := "redis.call('set', KEYS[1], 'x') return redis.pcall('incr', KEYS[1])"
	argsRun(t, r, []struct {
		args []string
		want string
	}{
		{[]string{"EVAL", window, "1", "fw:a", "60000"}, "*2\r\n:1\r\n:60000\r\n"},
		{[]string{"EVAL", window, "1", "fw:a", "60000"}, "*2\r\n:2\r\n:60000\r\n"},
		{[]string{"EVALSHA", sha1Hex(window), "1", "fw:a", "60000"}, "*2\r\n:3\r\n:60000\r\n"},
		{[]string{"EVAL", get, "1", "fw:a"}, "$1\r\n3\r\n"},
		{[]string{"EVAL", other, "0"}, "-ERR Ratchet runs a script's commands on its KEYS only: pass every key the script uses in KEYS, in order" + tail(other, "1")},
		{[]string{"EVAL", unknown, "1", "x"}, "-ERR Unknown Redis command called from script" + tail(unknown, "1")},
		{[]string{"EVAL_RO", incrRO, "1", "fw:a"}, "-ERR Write commands are not allowed from read-only scripts." + tail(incrRO, "1")},
		{[]string{"EVAL", arity, "1", "fw:a"}, "-ERR Wrong number of args calling Redis command from script" + tail(arity, "1")},
		{[]string{"EVAL", pcall, "1", "s"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"EVAL", "return redis.call('del', KEYS[2], KEYS[3])", "3", "fw:a", "s", "c"}, ":1\r\n"},
		{[]string{"EVAL", swapped, "2", "a", "b"}, "-ERR Ratchet runs a script's commands on its KEYS only: pass every key the script uses in KEYS, in order" + tail(swapped, "1")},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"EVAL", window, "1", "fw:b", "1000"}, "+QUEUED\r\n"},
		{[]string{"GET", "fw:b"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n*2\r\n:1\r\n:1000\r\n$1\r\n1\r\n"},
	})
}

// TestNativeMatchesInterpreter: each known script's native path answers what its own Lua
// text answers on the interpreter, for the same state at the same instant: the same
// requests go to two servers, EVALSHA (native) to one and EVAL of the text plus a space
// (no native path: the interpreter) to the other, at the same clock; replies must be
// equal but for the SHA1 in error texts, and errors are compared by their code and
// position (gopher-lua words runtime errors its own way). Not covered: limits' sliding
// window once its current window shifts, which calls RENAME, not a counter command (the
// interpreter answers "Unknown Redis command"; the native path renames).
func TestNativeMatchesInterpreter(t *testing.T) {
	texts := map[string]string{}
	for _, s := range commands.KnownScripts() {
		texts[s.SHA1] = s.Text
	}
	native, interp := newScriptRig(), newScriptRig()
	steps := []struct {
		advance int64 // ms, before the request
		args    string
	}{
		{0, shaAllowN + " 1 rate:k 2 2 1 1"}, {0, shaAllowN + " 1 rate:k 2 2 1 1"}, {0, shaAllowN + " 1 rate:k 2 2 1 1"},
		{600, shaAllowN + " 1 rate:k 2 2 1 1"}, {0, shaAllowN + " 1 rate:k 2 2 1 3"}, {0, shaAllowAtMost + " 1 rate:m 2 2 1 5"},
		{0, shaAllowN + " 1 rate:p 2 2 1 0"}, {0, shaAllowN + " 1 rate:min 10 10 60 1"},
		{0, shaAllowN + " 1 rate:b 1000000 1000000 1 1"}, {0, shaAllowN + " 1 rate:k 2 x 1 1"},
		{0, shaAllowN + " 0 2 2 1 1"}, {0, shaAllowN910 + " 1 rate:q 2 2 1 1"}, {0, shaAllowN90 + " 1 rate:v9 2 2 1 1"},
		{0, shaAllowAtMost9 + " 1 rate:w9 2 2 1 3"}, {0, shaGCRA8 + " 1 rate:v8 2 2 1 1"}, {0, shaGCRA8 + " 1 rate:v8 2 2 1 1"},
		{0, shaRLFlex + " 1 rlflx:k 1 60 5 60"}, {0, shaRLFlex + " 1 rlflx:k 1 60 5 60"}, {0, shaRLFlex + " 1 rlflx:e 1 0 5 0"},
		{0, shaRLFlex + " 1 rlflx:f 2 30 5 30"}, {0, shaRLRedisIncr + " 1 rl:k 0 60000"}, {0, shaRLRedisIncr + " 1 rl:k 1 60000"},
		{0, shaRLRedisGet + " 1 rl:k"}, {0, shaRLRedisGet + " 1 rl:none"}, {0, shaRLRedisInc3 + " 1 rl:o 0 1000"},
		{0, shaRLRedisInc42 + " 1 rl:o 0 1000"}, {0, shaRLRedisInc42 + " 1 rl:o 1 5000"},
		{0, shaLimitsFixed + " 1 LIMITS:k 60 1"}, {0, shaLimitsFixed + " 1 LIMITS:k 60 1"},
		{0, shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1"}, {0, shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1"},
		{0, shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1"}, {0, shaLimitsRead + " 2 LIMITS:{s}/-1 LIMITS:{s} 60"},
		{0, shaUluleIncr + " 1 limiter:k 1 60000"}, {0, shaUluleIncr + " 1 limiter:k 1 60000"}, {0, shaUlulePeek + " 1 limiter:k"},
		{0, shaUlulePeek + " 1 limiter:none"}, {0, shaSpring + " 2 t s 2 3 1795352399 1"},
		{0, shaSpring + " 2 t s 2 3 1795352399 1"}, {0, shaSpring40 + " 2 t4 s4 2 3 1795352399 1"},
		{0, shaSpring306 + " 2 t3 s3 2 3 1795352399 1"}, {0, shaSpring22 + " 2 t2 s2 2 3 1795352399 1"},
	}
	for _, s := range steps {
		native.clock.Advance(s.advance)
		interp.clock.Advance(s.advance)
		fields := strings.Fields(s.args)
		sha, text := fields[0], texts[fields[0]]+" "
		want := native.doArgs(append([]string{"EVALSHA"}, fields...)...)
		got := interp.doArgs(append([]string{"EVAL", text}, fields[1:]...)...)
		got = strings.ReplaceAll(got, sha1Hex(text), sha)
		if got != want && !sameError(got, want) {
			t.Errorf("%s:\n native      %q\n interpreter %q", s.args, want, got)
		}
	}
}

// sameError reports whether two error replies have the same code and the same
// " script: <sha1>, on @user_script:<line>." position.
func sameError(a, b string) bool {
	if !strings.HasPrefix(a, "-") || !strings.HasPrefix(b, "-") {
		return false
	}
	codeA, _, _ := strings.Cut(a, " ")
	codeB, _, _ := strings.Cut(b, " ")
	_, tailA, okA := strings.Cut(a, " script: ")
	_, tailB, okB := strings.Cut(b, " script: ")
	return codeA == codeB && okA && okB && tailA == tailB
}

// TestScriptCachePerDispatcher: each Dispatcher has its own script cache, as each
// redis-server has: SCRIPT LOAD on one is not seen by another, SCRIPT FLUSH on one does
// not forget the other's scripts.
func TestScriptCachePerDispatcher(t *testing.T) {
	a, b := newScriptRig(), newScriptRig()
	body := "return 'per dispatcher'"
	sha := sha1Hex(body)
	argsRun(t, a, []struct {
		args []string
		want string
	}{
		{[]string{"SCRIPT", "LOAD", body}, "$40\r\n" + sha + "\r\n"},
	})
	argsRun(t, b, []struct {
		args []string
		want string
	}{
		{[]string{"SCRIPT", "EXISTS", sha}, "*1\r\n:0\r\n"},
		{[]string{"EVALSHA", sha, "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"SCRIPT", "LOAD", body}, "$40\r\n" + sha + "\r\n"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{[]string{"SCRIPT", "EXISTS", sha}, "*1\r\n:0\r\n"},
	})
	argsRun(t, a, []struct {
		args []string
		want string
	}{
		{[]string{"SCRIPT", "EXISTS", sha}, "*1\r\n:1\r\n"},
		{[]string{"EVALSHA", sha, "0"}, "$14\r\nper dispatcher\r\n"},
	})
}

// TestLuaTime: an interpreted script's TIME is the script time in microseconds that the
// native scripts read (keyspace.Tx.NowUs): the clock's instant, and each later reading of the
// step a microsecond on, so the second element carries microseconds, not ms times 1000.
func TestLuaTime(t *testing.T) {
	r := newScriptRig()
	r.clock.Set(vectorMs + 123)
	script := "local a = redis.call('time') local b = redis.call('time') return {a[1], a[2], b[1], b[2]}"
	argsRun(t, r, []struct {
		args []string
		want string
	}{
		{[]string{"EVAL", script, "0"}, "*4\r\n$10\r\n1795352399\r\n$6\r\n123000\r\n$10\r\n1795352399\r\n$6\r\n123001\r\n"},
		{[]string{"EVAL", "return redis.call('time', 'x')", "0"}, "-ERR Wrong number of args calling Redis command from script" +
			" script: " + sha1Hex("return redis.call('time', 'x')") + ", on @user_script:1.\r\n"},
	})
}
