package commands

import (
	"bytes"
	"math"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// refParseUint and refParseWindow are the straightforward versions that parseUint (resp.ParseUint)
// and ParseWindow replaced for speed; the fast ones must agree with them on every input.
func refParseUint(b []byte, max uint64) (v uint64, ok bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func refParseWindow(b []byte) (int64, error) {
	units := [...]struct {
		suffix string
		ms     int64
	}{{"ms", 1}, {"s", 1000}, {"m", 60_000}, {"h", 3_600_000}, {"d", 86_400_000}}
	unit := int64(1)
	digits := b
	for _, u := range units {
		if n := len(b) - len(u.suffix); n > 0 && bytes.EqualFold(b[n:], []byte(u.suffix)) {
			unit, digits = u.ms, b[:n]
			break
		}
	}
	n, ok := refParseUint(digits, uint64(engine.MaxWindowMs))
	if !ok || n == 0 || int64(n) > engine.MaxWindowMs/unit {
		return 0, errWindow
	}
	return int64(n) * unit, nil
}

var numberSeeds = []string{"", "0", "00", "1", "01", "9", "60000", "1000000000000", "1125899906842624",
	"1125899906842625", "2678400000", "2678400001", "9223372036854775807", "9223372036854775808",
	"9999999999999999999", "10000000000000000000", "18446744073709551615", "18446744073709551616",
	"99999999999999999999", "123456789012345678901", "-1", "+1", " 1", "1 ", "1.5", "1e3"}

var windowSeeds = []string{"1", "1ms", "1MS", "1s", "1S", "1m", "1M", "1h", "1H", "1d", "1D", "31d", "32d",
	"744h", "745h", "2678400s", "2678400000", "2678400000ms", "0s", "ms", "s", "m", "5mS", "5Ms",
	"5sm", "5x", "5 s", "1ſ", "1mſ", "1\u212a", "\xc5\xbf", "60s", "1500ms", "1d1", "dd", "0d", "01s"}

func checkAgree(t *testing.T, in []byte) {
	t.Helper()
	for _, max := range []uint64{engine.MaxLimit, uint64(engine.MaxWindowMs), math.MaxInt64, math.MaxUint64} {
		v, ok := parseUint(in, max)
		rv, rok := refParseUint(in, max)
		if v != rv && (ok || rok) || ok != rok {
			t.Fatalf("parseUint(%q, %d) = %d, %v; reference %d, %v", in, max, v, ok, rv, rok)
		}
	}
	w, err := ParseWindow(in)
	rw, rerr := refParseWindow(in)
	if w != rw || err != rerr {
		t.Fatalf("ParseWindow(%q) = %d, %v; reference %d, %v", in, w, err, rw, rerr)
	}
}

func TestFastParsersAgree(t *testing.T) {
	for _, s := range append(numberSeeds, windowSeeds...) {
		checkAgree(t, []byte(s))
	}
}

func FuzzFastParsersAgree(f *testing.F) {
	for _, s := range append(numberSeeds, windowSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkAgree(t, in) })
}
