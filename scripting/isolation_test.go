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

// TestSealedMetatableUnreachable: getmetatable of the table getmetatable answers for the
// read-only globals (or a string) is nil, as on Redis 7, so no script can write into what
// every run of the interpreter shares: here an __index that would hand a later run the
// first run's KEYS and ARGV.
func TestSealedMetatableUnreachable(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 1})
	steps := []struct {
		body       string
		keys, args []string
		want       string
	}{
		{"return {type(getmetatable(_G)), type(getmetatable(getmetatable(_G))), type(getmetatable(getmetatable('')))}", nil, nil,
			"*3\r\n$5\r\ntable\r\n$3\r\nnil\r\n$3\r\nnil\r\n"},
		{"local mt = getmetatable(getmetatable(_G)) if mt then mt.__index = {stash = KEYS, v = ARGV[1]} end return 1",
			[]string{"secret-key"}, []string{"secret-arg"}, ":1\r\n"},
		{"local s = getmetatable(_G) return {s.v or 'none', s.stash and s.stash[1] or 'none'}", []string{"other"}, nil,
			"*2\r\n$4\r\nnone\r\n$4\r\nnone\r\n"},
	}
	for i, s := range steps {
		if got := evalString(e, s.body, s.keys, s.args); got != s.want {
			t.Errorf("step %d %q = %q, want %q", i, s.body, got, s.want)
		}
	}
}
