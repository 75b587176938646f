package resp

import (
	"math"
	"strconv"
)

// Double writes a floating-point number as Redis 7.0's addReplyDouble: "%.17g" ("inf",
// "-inf"), a RESP3 double (",1.5"), or in RESP2 a bulk string.
func (w *Writer) Double(f float64) {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	default:
		s = strconv.FormatFloat(f, 'g', 17, 64)
	}
	if w.Proto() == 3 {
		w.buf = append(append(append(w.buf, ','), s...), '\r', '\n')
		return
	}
	w.BulkString(s)
}

// Set writes the header of a set of n elements: a RESP3 set ("~"), or in RESP2 an array.
func (w *Writer) Set(n int) {
	if w.Proto() == 3 {
		w.buf = appendLine(w.buf, '~', int64(n))
		return
	}
	w.Array(n)
}
