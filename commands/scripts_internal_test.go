package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// TestScriptSHAs: each embedded text hashes to the SHA1 its library's users send (from
// ../shared/dropin/known_scripts.tsv), SCRIPT LOAD answers it, and EVAL of the text runs
// the same native equivalent as EVALSHA.
func TestScriptSHAs(t *testing.T) {
	want := map[string]string{
		textRedisRateAllowN: "f52a5b566060d79fd321d695df55bc918339c4aa", textRedisRateAllowAtMost: "054143318f521948424aa25df61d7f7ba835a9d7",
		textRedisRateAllowN910: "b51fcf1fec2622e401ecd1495ba719a525362891", textRedisRateAllowAtMost910: "a6aad3b47e739a75dad60abfc23778c5cf863397",
		textRedisRateAllowN90: "ed56c8a55853f0875fb1b3ec6a5f0d599ae50fb7", textRedisRateAllowAtMost90: "879df209aa81c6045299275bd92eddc98dc3ba7d",
		textRedisRateGCRA8: "c63c96596849c7e5dd745dda1f81821c2f36a85d", textRLFlexIncrTTL: "a1de965f42e177aa339706bd580f049065eca79a",
		textRLRedisIncrement: "81dbecea94d2d10514719b20ed51faf711529d9d", textRLRedisIncrement421: "b829ec02dca78a148dfc75dd3c86f488ed007c68",
		textRLRedisIncrement3: "3f424a504987d231baa2e19159bb5def8ad32f87", textRLRedisGet: "6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a",
		textLimitsIncrExpire: "628bd136a573a06b346879695681af12ccef300f", textLimitsAcquireSliding: "e8ac2a60cb040b0dbb56815a1e9c6fd032ce62e7",
		textLimitsSliding: "e7a0a27d4101baabb124af209bb0245197a359a1", textUluleIncr: "f74233f556d3f99c50b61169cf8aa8d5deb63fb2",
		textUlulePeek: "566f5c6a17e5fddb9a10bf389f754edd0d899c61", textSpringTokenBucket: "0ad5736ed1c04aae6ec194376c784b89b8c08a7a",
		textSpringTokenBucket40: "775635cca91092477cbcee85fd800accb6adc4b2", textSpringTokenBucket306: "76a566c51f92d8f643d16e0ef0101663d5380dba",
		textSpringTokenBucket22: "9d491aea731237273f4274f9ed9660b432b23791",
		textRLRedisIncrement6:   "895b92e1712734e1b464999be23953485475357b", // not in known_scripts.tsv: computed from v6.0.1's dist
	}
	if len(scriptsBySHA) != len(want) || len(scriptsByText) != len(want) {
		t.Fatalf("%d scripts by SHA1, %d by text; want %d", len(scriptsBySHA), len(scriptsByText), len(want))
	}
	clock := engine.NewManualClock(1795352399_000)
	eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 20})
	d := New(Options{Origin: eng, Role: "origin"})
	s := NewSession(1, "127.0.0.1:1", "127.0.0.1:2", 0)
	do := func(args ...string) string { return serveArgs(d, s, args...) }
	for text, sha := range want {
		sum := sha1.Sum([]byte(text))
		if got := hex.EncodeToString(sum[:]); got != sha {
			t.Errorf("sha1 of the text registered for %s is %s", sha, got)
		}
		if got := do("SCRIPT", "LOAD", text); got != "$40\r\n"+sha+"\r\n" {
			t.Errorf("SCRIPT LOAD of %s: %q", sha, got)
		}
	}
	// EVAL of the text runs what EVALSHA runs (redis7_reply_vectors.txt: EVAL #1).
	if got := do("EVAL", textRedisRateAllowN, "1", "rate:k", "2", "2", "1", "1"); got != "*4\r\n:1\r\n:1\r\n$2\r\n-1\r\n$3\r\n0.5\r\n" {
		t.Errorf("EVAL allowN: %q", got)
	}
	if got := do("EVAL", textRLFlexIncrTTL, "1", "rlflx:k", "1", "60", "5", "60"); got != "*2\r\n:1\r\n:60000\r\n" {
		t.Errorf("EVAL rate-limiter-flexible: %q", got)
	}
	// A text one space longer has no native path: the interpreter runs it, on the same key
	// (the second hit), and answers what the native path answers.
	if got := do("EVAL", textRLFlexIncrTTL+" ", "1", "rlflx:k", "1", "60", "5", "60"); got != "*2\r\n:2\r\n:60000\r\n" {
		t.Errorf("EVAL of a text one space longer: %q", got)
	}
}

// TestLuaFormats: numbers as Lua's tostring ("%.14g") and Redis 7.0's argument conversion
// ("%.17g") print them, strings as Lua reads them, Lua numbers as Redis's integer replies.
func TestLuaFormats(t *testing.T) {
	for _, c := range []struct {
		f        float64
		s14, s17 string
	}{
		{0.5, "0.5", "0.5"}, {-1, "-1", "-1"}, {1, "1", "1"}, {0, "0", "0"},
		{312123600.291677, "312123600.29168", "312123600.291677"},  // redis7_reply_vectors: GET rate:k
		{0.99952000379562, "0.99952000379562", "0.99952000379562"}, // values from C printf
		{1e20, "1e+20", "1e+20"}, {1.5e-7, "1.5e-07", "1.4999999999999999e-07"}, {60000, "60000", "60000"},
	} {
		if got := string(luaToString(c.f)); got != c.s14 {
			t.Errorf("tostring(%v) = %q, want %q", c.f, got, c.s14)
		}
		if got := string(redisArg(c.f)); got != c.s17 {
			t.Errorf("%%.17g of %v = %q, want %q", c.f, got, c.s17)
		}
	}
	for in, want := range map[string]float64{"1": 1, " 2.5 ": 2.5, "0x10": 16, "-0x10": -16, "1e3": 1000, "inf": math.Inf(1)} {
		if got, ok := luaNumber([]byte(in)); !ok || got != want {
			t.Errorf("tonumber(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", " ", "abc", "1_000", "1x", "0x", "--1"} {
		if got, ok := luaNumber([]byte(in)); ok {
			t.Errorf("tonumber(%q) = %v, want nil", in, got)
		}
	}
	for f, want := range map[float64]int64{1.9: 1, -1.9: -1, 1e19: -1 << 63, math.Inf(1): -1 << 63} {
		if got := luaInt(f); got != want {
			t.Errorf("integer reply of %v = %d, want %d", f, got, want)
		}
	}
}

// TestScriptsOnEdge: without an origin's keyspace (an edge), scripts answer as the counter
// commands do, and SCRIPT, which decides nothing, still answers.
func TestScriptsOnEdge(t *testing.T) {
	eng := engine.New(engine.NewManualClock(1795352399_000), engine.Config{})
	d := New(Options{Limiter: Local(eng), Role: "edge"})
	s := NewSession(1, "127.0.0.1:1", "127.0.0.1:2", 0)
	for _, c := range []struct{ args, want string }{
		{"EVALSHA " + scriptsByText[textRedisRateAllowN].sha + " 1 rate:k 1 1 1 1", "-ERR EVALSHA is decided by the origin; connect to the origin\r\n"},
		{"SCRIPT EXISTS " + scriptsByText[textRedisRateAllowN].sha, "*1\r\n:1\r\n"},
	} {
		var w resp.Writer
		var req [][]byte
		for _, a := range strings.Fields(c.args) {
			req = append(req, []byte(a))
		}
		d.Serve(s, &w, req)
		if got := string(w.Bytes()); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.args, got, c.want)
		}
	}
}
