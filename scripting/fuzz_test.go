package scripting_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratchet/ratchet/scripting"
)

// probe is run after every fuzzed script on the same engine (one pooled interpreter): it
// must answer as on a fresh engine, so no script changed the sandbox for the next one.
const probe = `return {type(KEYS), #ARGV, type(redis.call), type(string.rep), type(cjson.encode),
	type(bit.band), type(struct.pack), type(cmsgpack.pack), redis.sha1hex('x'),
	pcall(function() return os or io or debug or dofile or loadfile or require or print or getfenv end)}`

// FuzzRun runs arbitrary script bodies with arbitrary KEYS and ARGV against the fake
// keyspace: nothing may panic, every reply must be valid RESP in both protocols, and the
// sandbox must be intact afterwards (probe). Endless scripts are stopped by the context.
func FuzzRun(f *testing.F) {
	for _, v := range recorded {
		f.Add(v.script, "k", "a")
	}
	for _, s := range []string{
		"while true do end",
		"local t = {} t[1] = t return t",
		"local t = {} for i = 1, 100 do t = {t} end return cjson.encode(t)",
		"return string.rep('x', 1e9)",
		"return struct.unpack('c0', '')",
		"return cmsgpack.unpack('\\220\\255\\255')",
		"return redis.call(unpack(ARGV))",
		"setmetatable(getmetatable(''), {})",
		"return loadstring(string.dump(function() end))",
		"return coroutine.resume(coroutine.create(function() error({}) end))",
		"error({})",
		"error(setmetatable({}, {__tostring = function() error('x') end}))",
		"return {map = {[{}] = 1}, set = {1}}",
		"return {double = 0/0}",
		"return bit.tohex(1, -100)",
		"return tostring(setmetatable({}, {__tostring = function() return 1 end}))",
	} {
		f.Add(s, "k", "a")
	}
	want := string(runProbe(scripting.New(scripting.Config{}), f))
	f.Fuzz(func(t *testing.T, body, key, arg string) {
		e := scripting.New(scripting.Config{MaxIdle: 1, MaxString: 1 << 20})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		r := e.Run(ctx, scripting.Request{Body: []byte(body), Keys: bs([]string{key}), Args: bs([]string{arg, key})}, newFake())
		for _, proto := range []int{2, 3} {
			b := r.Append(nil, proto)
			if _, n, err := scripting.ParseReply(b); err != nil || n != len(b) {
				t.Fatalf("reply %.200q in RESP%d does not parse: %v", b, proto, err)
			}
		}
		if got := string(runProbe(e, t)); got != want {
			t.Fatalf("after %q the sandbox probe answers\n %q\nwant\n %q", body, got, want)
		}
	})
}

func runProbe(e *scripting.Engine, tb testing.TB) []byte {
	r := e.Run(context.Background(), scripting.Request{Body: []byte(probe), Keys: bs([]string{"k"})}, newFake())
	return r.Append(nil, 2)
}
