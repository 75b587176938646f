package commands_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
)

// TestNativeOnOtherTypes: a known script whose keys hold a hash, a list, a set or a sorted
// set answers what its Lua text answers on the interpreter (WRONGTYPE where it reads the
// key as a string), not what its native path, which reads strings only, would.
func TestNativeOnOtherTypes(t *testing.T) {
	texts := map[string]string{}
	for _, s := range commands.KnownScripts() {
		texts[s.SHA1] = s.Text
	}
	calls := []string{
		shaAllowN + " 1 rate:k 2 2 1 1", shaAllowAtMost + " 1 rate:m 2 2 1 5", shaGCRA8 + " 1 rate:v8 2 2 1 1",
		shaRLFlex + " 1 rlflx:k 1 60 5 60", shaRLRedisIncr + " 1 rl:k 1 60000", shaRLRedisGet + " 1 rl:k",
		shaLimitsFixed + " 1 LIMITS:k 60 1", shaLimitsSlide + " 2 LIMITS:{s}/-1 LIMITS:{s} 2 60 1",
		shaUluleIncr + " 1 limiter:k 1 60000", shaUlulePeek + " 1 limiter:k", shaSpring + " 2 t s 2 3 1795352399 1",
	}
	fills := []string{"HSET %s f v", "RPUSH %s a", "SADD %s a", "ZADD %s 1 a"}
	for _, fill := range fills {
		native, interp := newScriptRig(), newScriptRig()
		for _, call := range calls {
			fields := strings.Fields(call)
			n := int(fields[1][0] - '0')
			for _, k := range fields[2 : 2+n] {
				native.doArgs(strings.Fields(strings.Replace(fill, "%s", k, 1))...)
				interp.doArgs(strings.Fields(strings.Replace(fill, "%s", k, 1))...)
			}
			sha, text := fields[0], texts[fields[0]]+" "
			want := interp.doArgs(append([]string{"EVAL", text}, fields[1:]...)...)
			want = strings.ReplaceAll(want, sha1Hex(text), sha)
			got := native.doArgs(append([]string{"EVALSHA"}, fields...)...)
			if got != want && !sameError(got, want) {
				t.Errorf("%s on %q:\n EVALSHA         %q\n the interpreter %q", call, fill, got, want)
			}
			for _, k := range fields[2 : 2+n] {
				native.doArgs("DEL", k)
				interp.doArgs("DEL", k)
			}
		}
	}
}

// BenchmarkServeKnownScript serves go-redis/redis_rate's allowN natively: the path that
// checks the script's keys hold strings before it runs.
func BenchmarkServeKnownScript(b *testing.B) {
	r := newScriptRig()
	args := make([][]byte, 0, 8)
	for _, a := range strings.Fields("EVALSHA " + shaAllowN + " 1 rate:k 1000000 1000000 1 1") {
		args = append(args, []byte(a))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.w.Reset()
		r.d.Serve(r.s, &r.w, args)
	}
}

// BenchmarkServeZAdd serves a sliding log's ZADD on one key (a member replaced each time).
func BenchmarkServeZAdd(b *testing.B) {
	r := newScriptRig()
	args := [][]byte{[]byte("ZADD"), []byte("log"), []byte("1"), []byte("m")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		args[2] = strconv.AppendInt(args[2][:0], int64(i), 10)
		r.w.Reset()
		r.d.Serve(r.s, &r.w, args)
	}
}
