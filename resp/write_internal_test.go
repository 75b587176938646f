package resp

import (
	"math"
	"strconv"
	"testing"

	"github.com/tidwall/redcon"
)

func TestAppendLine(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1000, 12345, 60000, 999999, 1000000,
		1125899906842624, 1000000000000, math.MaxInt64, math.MaxInt64 - 1,
		-1, -9, -10, -99, -100, -12345, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p > 0 && p < math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p+1, -p, -p-1)
	}
	for _, n := range vals {
		checkLine(t, n)
	}
}

func checkLine(t *testing.T, n int64) {
	t.Helper()
	for _, c := range []byte{':', '*', '%', '$'} {
		want := string(c) + strconv.FormatInt(n, 10) + "\r\n"
		if got := string(appendLine([]byte("x"), c, n)); got != "x"+want {
			t.Fatalf("appendLine(%q, %d) = %q, want %q", c, n, got, "x"+want)
		}
	}
}

// TestWriterMatchesRedcon checks the hand-written encoders against redcon's, which the
// Writer used before.
func TestWriterMatchesRedcon(t *testing.T) {
	for _, n := range []int64{0, 7, 10, 123, -1, -45, 1 << 50, math.MinInt64} {
		var w Writer
		w.Int(n)
		if got, want := string(w.Bytes()), string(redcon.AppendInt(nil, n)); got != want {
			t.Errorf("Int(%d) = %q, want %q", n, got, want)
		}
	}
	for _, s := range []string{"", "a", "0123456789", string(make([]byte, 1000))} {
		var w Writer
		w.BulkString(s)
		w.Bulk([]byte(s))
		want := string(redcon.AppendBulk(redcon.AppendBulkString(nil, s), []byte(s)))
		if got := string(w.Bytes()); got != want {
			t.Errorf("bulk %d bytes = %q, want %q", len(s), got, want)
		}
	}
	for _, n := range []int{0, 5, 10, 20, 123} {
		var w Writer
		w.Array(n)
		if got, want := string(w.Bytes()), string(redcon.AppendArray(nil, n)); got != want {
			t.Errorf("Array(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzAppendLine(f *testing.F) {
	for _, n := range []int64{0, 9, 10, -1, math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) { checkLine(t, n) })
}
