package commands_test

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
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
	zadd, swapped := "return redis.call('zadd', KEYS[1], 1, 'a')", "return redis.call('del', KEYS[2], KEYS[1])"
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
		{[]string{"EVAL", zadd, "1", "z"}, "-ERR Unknown Redis command called from script" + tail(zadd, "1")},
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
