package scripting_test

import (
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// TestCjsonNewIsFresh: cjson.new() returns a fresh table each call, as Redis's
// lua_cjson_new does, not the library's own: a script that replaces a function in it, or
// keeps a run's KEYS there, changes nothing a later script on the same interpreter reads.
// One idle state, so every run below shares it.
func TestCjsonNewIsFresh(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 1})
	steps := []struct{ body, keys, want string }{
		{"local c = cjson.new() c.encode = function() return 'pwned' end c.stash = KEYS return 1", "secret", ":1\r\n"},
		{"return cjson.encode({1})", "", "$3\r\n[1]\r\n"},
		{"return cjson.new().encode({1})", "", "$3\r\n[1]\r\n"},
		{"return cjson.new().stash and cjson.new().stash[1] or 'none'", "other", "$4\r\nnone\r\n"},
		{"local c = cjson.new() return {tostring(c == cjson), tostring(c.null == cjson.null), tostring(c.new() == c), c.decode('[1]')[1]}", "",
			"*4\r\n$5\r\nfalse\r\n$4\r\ntrue\r\n$5\r\nfalse\r\n:1\r\n"},
	}
	for i, s := range steps {
		var keys []string
		if s.keys != "" {
			keys = []string{s.keys}
		}
		if got := evalString(e, s.body, keys, nil); got != s.want {
			t.Errorf("step %d %q = %q, want %q", i, s.body, got, s.want)
		}
	}
}
