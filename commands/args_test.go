package commands_test

import (
	"strings"
	"testing"

	"github.com/ratchet/ratchet/commands"
)

func split(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Split(s, " ") {
		out = append(out, []byte(f))
	}
	return out
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // 0: error
	}{
		{"1", 1}, {"1500", 1500}, {"1500ms", 1500}, {"1500MS", 1500}, {"60s", 60000}, {"1m", 60000},
		{"1h", 3600000}, {"1d", 86400000}, {"31d", 2678400000}, {"2678400000", 2678400000}, {"744h", 2678400000},
		{"1ms", 1}, {"1S", 1000},
		{"0", 0}, {"0s", 0}, {"32d", 0}, {"2678400001", 0}, {"1.5s", 0}, {"10x", 0}, {"", 0}, {"s", 0},
		{"-1", 0}, {"+1", 0}, {" 1", 0}, {"01", 0}, {"1 s", 0}, {"99999999999999999999999d", 0}, {"1w", 0},
	}
	for _, tt := range tests {
		got, err := commands.ParseWindow([]byte(tt.in))
		if tt.want == 0 {
			if err == nil || err.Error() != "ERR window must be from 1ms to 31d" {
				t.Errorf("ParseWindow(%q) = %d, %v; want the window error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseWindow(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseLimit(t *testing.T) {
	long := strings.Repeat("k", 1025)
	tests := []struct {
		in   string
		want commands.LimitArgs
		err  string
	}{
		{in: "user:42 100 60s", want: commands.LimitArgs{Key: []byte("user:42"), Limit: 100, WindowMs: 60000, Cost: 1}},
		{in: "k 1125899906842624 1d COST 0 NS api", want: commands.LimitArgs{Key: []byte("k"), Limit: 1 << 50, WindowMs: 86400000, Namespace: []byte("api")}},
		{in: "k 5 1 ns x cost 5", want: commands.LimitArgs{Key: []byte("k"), Limit: 5, WindowMs: 1, Cost: 5, Namespace: []byte("x")}},
		{in: "k 5 1 COST 1125899906842624", want: commands.LimitArgs{Key: []byte("k"), Limit: 5, WindowMs: 1, Cost: 1 << 50}},
		{in: strings.Repeat("k", 1024) + " 1 1", want: commands.LimitArgs{Key: []byte(strings.Repeat("k", 1024)), Limit: 1, WindowMs: 1, Cost: 1}},
		{in: " 1 1s", err: "ERR key must be 1 to 1024 bytes"},
		{in: long + " 1 1s", err: "ERR key must be 1 to 1024 bytes"},
		{in: "k 0 1s", err: "ERR limit must be"},
		{in: "k -1 1s", err: "ERR limit must be"},
		{in: "k +1 1s", err: "ERR limit must be"},
		{in: "k 05 1s", err: "ERR limit must be"},
		{in: "k 1.5 1s", err: "ERR limit must be"},
		{in: "k 1125899906842625 1s", err: "ERR limit must be"},
		{in: "k 99999999999999999999999 1s", err: "ERR limit must be"},
		{in: "k abc 1s", err: "ERR limit must be"},
		{in: "k 1 0", err: "ERR window must be"},
		{in: "k 1 32d", err: "ERR window must be"},
		{in: "k 1 1s COST -1", err: "ERR cost must be"},
		{in: "k 1 1s COST 1125899906842625", err: "ERR cost must be"},
		{in: "k 1 1s COST x", err: "ERR cost must be"},
		{in: "k 1 1s NS ", err: "ERR namespace must be 1 to 128 bytes"},
		{in: "k 1 1s NS " + strings.Repeat("n", 129), err: "ERR namespace must be 1 to 128 bytes"},
		{in: "k 1 1s COST", err: "ERR syntax error"},
		{in: "k 1 1s COST 1 COST 1", err: "ERR syntax error"},
		{in: "k 1 1s NS a NS b", err: "ERR syntax error"},
		{in: "k 1 1s BURST 1", err: "ERR syntax error"},
		{in: "k 1", err: "ERR syntax error"},
	}
	for _, tt := range tests {
		got, err := commands.ParseLimit(split(tt.in))
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ParseLimit(%.40q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || string(got.Key) != string(tt.want.Key) || got.Limit != tt.want.Limit ||
			got.WindowMs != tt.want.WindowMs || got.Cost != tt.want.Cost || string(got.Namespace) != string(tt.want.Namespace) {
			t.Errorf("ParseLimit(%.40q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in    string
		limit uint64
		ns    string
		err   string
	}{
		{in: "k 60s"},
		{in: "k 60s LIMIT 10 NS a", limit: 10, ns: "a"},
		{in: "k 60s ns a limit 10", limit: 10, ns: "a"},
		{in: "k 60s LIMIT 0", err: "ERR limit must be"},
		{in: "k 60s LIMIT", err: "ERR syntax error"},
		{in: "k 60s LIMIT 1 LIMIT 2", err: "ERR syntax error"},
		{in: "k 60s COST 1", err: "ERR syntax error"},
		{in: "k 0", err: "ERR window must be"},
		{in: " 1s", err: "ERR key must be"},
		{in: "k", err: "ERR syntax error"},
	}
	for _, tt := range tests {
		got, err := commands.ParseStatus(split(tt.in))
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ParseStatus(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.Limit != tt.limit || string(got.Namespace) != tt.ns {
			t.Errorf("ParseStatus(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

// FuzzParseLimit checks that no argument list makes the parser panic, and that whatever it
// accepts is within the contract's ranges.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"k 100 60s", "k 1125899906842624 31d COST 0 NS x", "k 1 1s COST", "k 0 0",
		"k 99999999999999999999 1s", "k 1 18446744073709551616ms", "k 1 1s NS a NS a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := commands.ParseLimit(split(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("error without ERR prefix: %v", err)
			}
			return
		}
		if len(a.Key) < 1 || len(a.Key) > 1024 || a.Limit < 1 || a.Limit > 1<<50 || a.Cost > 1<<50 ||
			a.WindowMs < 1 || a.WindowMs > 2678400000 || (a.Namespace != nil && (len(a.Namespace) < 1 || len(a.Namespace) > 128)) {
			t.Fatalf("accepted out-of-range arguments %+v from %q", a, s)
		}
		if _, err := commands.ParseStatus(split(s)); err != nil && !strings.HasPrefix(err.Error(), "ERR ") {
			t.Fatalf("status error without ERR prefix: %v", err)
		}
	})
}
