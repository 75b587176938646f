package resp_test

import (
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/ratchet/ratchet/resp"
)

func TestReplyReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		kind resp.ReplyKind
		text string
		ints []int64
		err  string // substring of the error, "" for none
	}{
		{"ok", "+OK\r\n", resp.SimpleReply, "OK", nil, ""},
		{"empty simple", "+\r\n", resp.SimpleReply, "", nil, ""},
		{"error", "-ERR bad key\r\n", resp.ErrorReply, "ERR bad key", nil, ""},
		{"wrongpass", "-WRONGPASS invalid secret\r\n", resp.ErrorReply, "WRONGPASS invalid secret", nil, ""},
		{"ints", "*3\r\n:1\r\n:-1\r\n:0\r\n", resp.IntsReply, "", []int64{1, -1, 0}, ""},
		{"empty array", "*0\r\n", resp.IntsReply, "", []int64{}, ""},
		{"extremes", "*2\r\n:9223372036854775807\r\n:-9223372036854775808\r\n", resp.IntsReply, "",
			[]int64{math.MaxInt64, math.MinInt64}, ""},
		{"array at bound", "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", resp.IntsReply, "", []int64{1, 2, 3, 4}, ""},
		{"array over bound", "*5\r\n", 0, "", nil, "invalid reply array length"},
		{"huge array", "*99999999999999999999\r\n", 0, "", nil, "invalid reply array length"},
		{"null array", "*-1\r\n", 0, "", nil, "invalid reply array length"},
		{"overflow", "*1\r\n:9223372036854775808\r\n", 0, "", nil, "invalid integer"},
		{"underflow", "*1\r\n:-9223372036854775809\r\n", 0, "", nil, "invalid integer"},
		{"not a number", "*1\r\n:12a\r\n", 0, "", nil, "invalid integer"},
		{"empty integer", "*1\r\n:\r\n", 0, "", nil, "invalid integer"},
		{"bare minus", "*1\r\n:-\r\n", 0, "", nil, "invalid integer"},
		{"bulk in array", "*1\r\n$1\r\nx\r\n", 0, "", nil, "expected ':'"},
		{"nested array", "*1\r\n*0\r\n", 0, "", nil, "expected ':'"},
		{"bulk reply", "$2\r\nhi\r\n", resp.BulkReply, "hi", nil, ""},
		{"empty bulk", "$0\r\n\r\n", resp.BulkReply, "", nil, ""},
		{"bulk of a reply", "$12\r\n*1\r\n$2\r\nok\r\n\r\n", resp.BulkReply, "*1\r\n$2\r\nok\r\n", nil, ""},
		{"null bulk", "$-1\r\n", 0, "", nil, "invalid bulk reply length"},
		{"bulk over bound", "$4194305\r\n", 0, "", nil, "invalid bulk reply length"},
		{"bulk without CRLF", "$2\r\nhiXY", 0, "", nil, "not terminated"},
		{"short bulk", "$5\r\nhi\r\n", 0, "", nil, "unexpected EOF"},
		{"lone integer", ":1\r\n", 0, "", nil, "unexpected reply type"},
		{"lf only", "+OK\n", 0, "", nil, "CRLF"},
		{"empty line", "\r\n", 0, "", nil, "CRLF"},
		{"long line", "+" + strings.Repeat("x", resp.MaxReplyLine) + "\r\n", 0, "", nil, "longer than"},
		{"truncated line", "+OK", 0, "", nil, io.ErrUnexpectedEOF.Error()},
		{"truncated array", "*2\r\n:1\r\n", 0, "", nil, io.ErrUnexpectedEOF.Error()},
		{"eof", "", 0, "", nil, io.EOF.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time: a reply split anywhere must read the same.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				rr := resp.NewReplyReader(r, 4)
				rep, err := rr.Read(nil)
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("Read(%q) error = %v, want %q", tc.in, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Read(%q): %v", tc.in, err)
				}
				if rep.Kind != tc.kind || string(rep.Text) != tc.text {
					t.Fatalf("Read(%q) = kind %d text %q, want %d %q", tc.in, rep.Kind, rep.Text, tc.kind, tc.text)
				}
				if tc.kind == resp.IntsReply && !slices.Equal(rep.Ints, tc.ints) {
					t.Fatalf("Read(%q) ints = %v, want %v", tc.in, rep.Ints, tc.ints)
				}
			}
		})
	}
}

func TestReplyReaderProtocolErrorType(t *testing.T) {
	_, err := resp.NewReplyReader(strings.NewReader("*1\r\n$0\r\n\r\n"), 8).Read(nil)
	var pe *resp.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *resp.ProtocolError", err, err)
	}
}

// A stream of pipelined replies reads in order, and dst's storage is reused.
func TestReplyReaderPipelined(t *testing.T) {
	in := "+OK\r\n*2\r\n:5\r\n:6\r\n-ERR nope\r\n*1\r\n:7\r\n"
	rr := resp.NewReplyReader(strings.NewReader(in), 8)
	dst := make([]int64, 0, 8)
	var got []string
	for {
		rep, err := rr.Read(dst)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rep.Kind {
		case resp.IntsReply:
			if &rep.Ints[:1][0] != &dst[:1][0] {
				t.Error("dst storage not reused")
			}
			for _, v := range rep.Ints {
				got = append(got, strings.Repeat("i", int(v)))
			}
		default:
			got = append(got, string(rep.Text))
		}
	}
	want := []string{"OK", "iiiii", "iiiiii", "ERR nope", "iiiiiii"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A header claiming the bound is accepted without trusting it further: a short stream
// ends in io.ErrUnexpectedEOF, not in an allocation of the claimed size.
func TestReplyReaderHeaderIsNotTrusted(t *testing.T) {
	const bound = 1 + 5*8192
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := resp.NewReplyReader(strings.NewReader("*40961\r\n:1\r\n"), bound).Read(nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error = %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("a short reply claiming %d integers allocated %d bytes", bound, grew)
	}
	if _, err := resp.NewReplyReader(strings.NewReader("*40962\r\n"), bound).Read(nil); err == nil {
		t.Error("header above the bound accepted")
	}
}

func FuzzReplyReader(f *testing.F) {
	f.Add([]byte("*2\r\n:1\r\n:2\r\n+OK\r\n-ERR x\r\n"))
	f.Add([]byte("*9999\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rr := resp.NewReplyReader(strings.NewReader(string(in)), 64)
		for range 100 {
			rep, err := rr.Read(nil)
			if err != nil {
				return
			}
			if len(rep.Ints) > 64 {
				t.Fatalf("%d ints beyond the bound", len(rep.Ints))
			}
		}
	})
}
