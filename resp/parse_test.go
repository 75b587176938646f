package resp_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/resp"
)

func parseAll(t *testing.T, in string) ([][]string, error) {
	t.Helper()
	buf := []byte(in)
	var out [][]string
	for len(buf) > 0 {
		args, n, err := resp.Parse(buf, nil, resp.DefaultLimits())
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		var cmd []string
		for _, a := range args {
			cmd = append(cmd, string(a))
		}
		out = append(out, cmd)
		buf = buf[n:]
	}
	return out, nil
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want [][]string
		err  string // substring of the protocol error, "" for none
	}{
		{"array", "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", [][]string{{"PING", "hi"}}, ""},
		{"pipeline", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}, {"PING"}}, ""},
		{"binary bulk", "*1\r\n$4\r\na\r\nb\r\n", [][]string{{"a\r\nb"}}, ""},
		{"empty bulk", "*1\r\n$0\r\n\r\n", [][]string{{""}}, ""},
		{"inline", "PING hello\r\n", [][]string{{"PING", "hello"}}, ""},
		{"inline lf only", "PING  a\tb\n", [][]string{{"PING", "a", "b"}}, ""},
		{"empty inline", "\r\n", [][]string{nil}, ""},
		{"zero array", "*0\r\n", [][]string{nil}, ""},
		{"null array", "*-1\r\n", [][]string{nil}, ""},
		{"incomplete header", "*2\r", nil, ""},
		{"incomplete bulk", "*1\r\n$10\r\nabc", nil, ""},
		{"incomplete second arg", "*2\r\n$1\r\na\r\n", nil, ""},
		{"huge bulk", "*1\r\n$9223372036854775800\r\n", nil, "invalid bulk length"},
		{"bulk over limit", "*1\r\n$524289\r\n", nil, "invalid bulk length"},
		{"huge array", "*999999999\r\n", nil, "invalid multibulk length"},
		{"array over limit", "*8193\r\n", nil, "invalid multibulk length"},
		{"negative array", "*-5\r\n", nil, "invalid multibulk length"},
		{"negative bulk", "*1\r\n$-1\r\n", nil, "invalid bulk length"},
		{"not a number", "*x\r\n", nil, "invalid multibulk length"},
		{"plus sign", "*+1\r\n", nil, "invalid multibulk length"},
		{"no CR", "*1\n", nil, "invalid multibulk length"},
		{"expected dollar", "*1\r\n+OK\r\n", nil, "expected '$', got '+'"},
		{"bad terminator", "*1\r\n$1\r\nabc\r\n", nil, "not terminated"},
		{"header without newline", "*" + strings.Repeat("1", 40), nil, "too big multibulk count string"},
		{"inline too big", strings.Repeat("a", 64<<10+1), nil, "too big inline request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAll(t, tt.in)
			if tt.err != "" {
				var pe *resp.ProtocolError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want protocol error containing %q", err, tt.err)
				}
				if !strings.HasPrefix(err.Error(), "Protocol error: ") {
					t.Fatalf("err = %q, want the Redis prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if strings.Join(got[i], "|") != strings.Join(tt.want[i], "|") || len(got[i]) != len(tt.want[i]) {
					t.Fatalf("command %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestParseByteByByte feeds a pipeline one byte at a time, as a slow client would: every
// prefix is either incomplete or yields exactly the next command.
func TestParseByteByByte(t *testing.T) {
	in := []byte("*3\r\n$8\r\nRL.LIMIT\r\n$3\r\nk\r\n\r\n$2\r\n10\r\nPING\r\n*1\r\n$4\r\nPING\r\n")
	want := []string{"RL.LIMIT|k\r\n|10", "PING", "PING"}
	var got []string
	var buf []byte
	for _, b := range in {
		buf = append(buf, b)
		args, n, err := resp.Parse(buf, nil, resp.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			var s []string
			for _, a := range args {
				s = append(s, string(a))
			}
			got = append(got, strings.Join(s, "|"))
			buf = buf[n:]
		}
	}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseReusesArgs(t *testing.T) {
	dst := make([][]byte, 0, 8)
	args, _, err := resp.Parse([]byte("*2\r\n$1\r\na\r\n$1\r\nb\r\n"), dst, resp.DefaultLimits())
	if err != nil || len(args) != 2 || &args[0] != &dst[:1][0] {
		t.Fatalf("args not built in dst: %v %v", args, err)
	}
}

func TestWriter(t *testing.T) {
	var w resp.Writer
	w.Map(1)
	w.BulkString("a")
	w.Null()
	w.Int(-3)
	w.Simple("OK")
	w.Error("ERR x\r\ny")
	if got, want := string(w.Bytes()), "*2\r\n$1\r\na\r\n$-1\r\n:-3\r\n+OK\r\n-ERR x  y\r\n"; got != want {
		t.Fatalf("RESP2 = %q, want %q", got, want)
	}
	w.Reset()
	w.SetProto(3)
	w.Map(1)
	w.BulkString("a")
	w.Null()
	if got, want := string(w.Bytes()), "%1\r\n$1\r\na\r\n_\r\n"; got != want {
		t.Fatalf("RESP3 = %q, want %q", got, want)
	}
}

// FuzzParse checks that no input makes the parser panic, loop, allocate beyond its bounds
// or return arguments that are not inside the input. The seeds include the hostile headers
// that crash or stall unbounded parsers.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$9223372036854775800\r\n",
		"*999999999\r\n",
		"*-1\r\n", "*0\r\n", "*1\r\n$-1\r\n",
		"*3\r\n$8\r\nRL.LIMIT\r\n$1\r\nk\r\n$3\r\n100\r\n",
		"PING\r\n", "\r\n", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n",
		"*2\r\n$1\r\na", "$5\r\nhello\r\n", "*1\r\n:5\r\n",
		"*" + strings.Repeat("9", 40),
	} {
		f.Add([]byte(s))
	}
	lim := resp.Limits{MaxArgs: 16, MaxBulk: 64, MaxInline: 128, MaxBuffer: 1024}
	f.Fuzz(func(t *testing.T, in []byte) {
		buf := in
		for steps := 0; len(buf) > 0; steps++ {
			if steps > len(in) {
				t.Fatal("parser made no progress")
			}
			args, n, err := resp.Parse(buf, nil, lim)
			if err != nil || n == 0 {
				return
			}
			if n > len(buf) || len(args) > lim.MaxArgs {
				t.Fatalf("consumed %d of %d, %d args", n, len(buf), len(args))
			}
			for _, a := range args {
				if len(a) > max(lim.MaxBulk, lim.MaxInline) || !bytes.Contains(buf[:n], a) {
					t.Fatalf("arg %q not within the request", a)
				}
			}
			buf = buf[n:]
		}
	})
}

func BenchmarkParse(b *testing.B) {
	in := []byte("*4\r\n$8\r\nRL.LIMIT\r\n$7\r\nuser:42\r\n$3\r\n100\r\n$3\r\n60s\r\n")
	dst := make([][]byte, 0, 8)
	lim := resp.DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		args, _, err := resp.Parse(in, dst, lim)
		if err != nil || len(args) != 4 {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteDecision(b *testing.B) {
	var w resp.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		w.Array(5)
		w.Int(1)
		w.Int(100)
		w.Int(99)
		w.Int(0)
		w.Int(60000)
	}
}
