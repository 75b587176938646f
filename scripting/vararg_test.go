package scripting_test

import (
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// TestMainChunkBuildsNoArgTable: a script's main chunk is vararg as Lua 5.1's is, without
// the `arg` table gopher-lua would build on every call (half the bytes a call of a limiter
// script allocated); `...` and a global named arg answer as on Redis.
func TestMainChunkBuildsNoArgTable(t *testing.T) {
	e := scripting.New(scripting.Config{})
	for _, tc := range []struct{ body, want string }{
		{"return redis.call('incr', KEYS[1])", ":1\r\n"},
		{"return select('#', ...)", ":0\r\n"},
		{"local function f(...) return select('#', ...) end return f(1, 2)", ":2\r\n"},
		{"return arg", "-ERR user_script:1: Script attempted to access nonexistent global variable 'arg' script: " +
			scripting.SHA1([]byte("return arg")) + ", on @user_script:1.\r\n"},
	} {
		if scripting.BuildsArgTable(e, tc.body) {
			t.Errorf("%q: its main chunk builds an arg table on every call", tc.body)
		}
		if got := evalString(e, tc.body, []string{"k"}, nil); got != tc.want {
			t.Errorf("%q answered %q, want %q", tc.body, got, tc.want)
		}
	}
}
