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

// TestEvalFindsScriptsByText: EVAL of a cached text runs it without hashing, and the
// text index is bounded and flushed with the cache it indexes.
func TestEvalFindsScriptsByText(t *testing.T) {
	e := scripting.New(scripting.Config{MaxScripts: 2})
	for i := range 5 {
		body := "return " + string(rune('1'+i))
		if got, want := evalString(e, body, nil, nil), ":"+string(rune('1'+i))+"\r\n"; got != want {
			t.Fatalf("%s answered %q, want %q", body, got, want)
		}
	}
	if byBody, bySHA := scripting.CachedBodies(e); byBody != 2 || bySHA != 2 {
		t.Fatalf("after 5 scripts with MaxScripts 2: %d by text, %d by SHA1; want 2 and 2", byBody, bySHA)
	}
	if sha, msg := e.Load([]byte("return 9")); msg != "" || !e.Exists(sha) {
		t.Fatalf("SCRIPT LOAD: %q %q", sha, msg)
	}
	if got := evalString(e, "return 9", nil, nil); got != ":9\r\n" {
		t.Fatalf("EVAL of a loaded text answered %q", got)
	}
	e.Flush()
	if byBody, bySHA := scripting.CachedBodies(e); byBody != 0 || bySHA != 0 {
		t.Fatalf("after SCRIPT FLUSH: %d by text, %d by SHA1", byBody, bySHA)
	}
	if got := evalString(e, "return 9", nil, nil); got != ":9\r\n" {
		t.Fatalf("EVAL after SCRIPT FLUSH answered %q", got)
	}
}
