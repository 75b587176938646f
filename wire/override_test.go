package wire_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// TestOverridesRoundTrip: RL.INTERNAL.OVERRIDES decodes to what was encoded, the most
// records fit the origin's parser and one more does not, and malformed records are
// refused with the error of their field.
func TestOverridesRoundTrip(t *testing.T) {
	k := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "api", Key: []byte("user:"), WindowMs: 60_000})
	recs := []engine.OverrideRecord{
		{Key: k, Prefix: true, Limit: 10, Stamp: engine.MaxOverrideStamp, Region: "eu"},
		{Key: k, Limit: 0, Stamp: 1, Region: "us"},
	}
	got, err := wire.ParseOverrides(parse(t, wire.AppendOverrides(nil, recs)))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("ParseOverrides = %+v, %v; want %+v", got, err, recs)
	}
	many := make([]engine.OverrideRecord, wire.MaxOverrideItems+1)
	for i := range many {
		many[i] = engine.OverrideRecord{Key: k, Limit: engine.MaxLimit, Stamp: engine.MaxOverrideStamp, Region: "eu"}
	}
	lim := resp.DefaultLimits()
	fits := func(b []byte) bool {
		_, n, err := resp.Parse(b, nil, lim)
		return err == nil && n == len(b)
	}
	if !fits(wire.AppendOverrides(nil, many[:wire.MaxOverrideItems])) || fits(wire.AppendOverrides(nil, many)) {
		t.Errorf("MaxOverrideItems %d does not match MaxArgs %d", wire.MaxOverrideItems, lim.MaxArgs)
	}
	bad := []struct {
		name string
		args []string
		want error
	}{
		{"no record", []string{wire.CmdOverrides}, wire.ErrSyntax},
		{"half a record", []string{wire.CmdOverrides, string(k), "0", "1"}, wire.ErrSyntax},
		{"bad key", []string{wire.CmdOverrides, "", "0", "1", "1", "eu"}, wire.ErrKey},
		{"bad flags", []string{wire.CmdOverrides, string(k), "2", "1", "1", "eu"}, wire.ErrInt},
		{"limit beyond 2^50", []string{wire.CmdOverrides, string(k), "0", "1125899906842625", "1", "eu"}, wire.ErrInt},
		{"empty region", []string{wire.CmdOverrides, string(k), "0", "1", "1", ""}, wire.ErrInt},
		{"stamp 2^64-1 (the next would wrap)", []string{wire.CmdOverrides, string(k), "0", "1", "18446744073709551615", "eu"}, wire.ErrInt},
		{"stamp beyond MaxOverrideStamp", []string{wire.CmdOverrides, string(k), "0", "1", "9223372036854775808", "eu"}, wire.ErrInt},
	}
	for _, b := range bad {
		args := make([][]byte, len(b.args))
		for i, a := range b.args {
			args[i] = []byte(a)
		}
		if _, err := wire.ParseOverrides(args); !errors.Is(err, b.want) {
			t.Errorf("%s: %v, want %v", b.name, err, b.want)
		}
	}
}
