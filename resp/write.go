package resp

import (
	"strconv"

	"github.com/tidwall/redcon"
)

// Writer appends replies to a buffer in the protocol of one connection: RESP2 by default,
// RESP3 after HELLO 3. The zero value writes RESP2. It is owned by one goroutine.
type Writer struct {
	buf   []byte
	proto int
}

// SetProto selects RESP2 (2) or RESP3 (3) for the following replies.
func (w *Writer) SetProto(p int) { w.proto = p }

// Proto returns the protocol in use: 2 or 3.
func (w *Writer) Proto() int {
	if w.proto == 3 {
		return 3
	}
	return 2
}

// Bytes returns the buffered replies.
func (w *Writer) Bytes() []byte { return w.buf }

// Reset empties the buffer, keeping its storage.
func (w *Writer) Reset() { w.buf = w.buf[:0] }

// Len returns the number of buffered bytes.
func (w *Writer) Len() int { return len(w.buf) }

// Int writes an integer.
func (w *Writer) Int(n int64) { w.buf = redcon.AppendInt(w.buf, n) }

// Array writes the header of an array of n elements.
func (w *Writer) Array(n int) { w.buf = redcon.AppendArray(w.buf, n) }

// Map writes the header of a map of n pairs: a RESP3 map, or in RESP2 a flat array of 2n.
func (w *Writer) Map(n int) {
	if w.Proto() == 3 {
		w.buf = append(w.buf, '%')
		w.buf = strconv.AppendInt(w.buf, int64(n), 10)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.Array(2 * n)
}

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) { w.buf = redcon.AppendBulk(w.buf, b) }

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) { w.buf = redcon.AppendBulkString(w.buf, s) }

// Simple writes a simple string ("+OK"). s must not contain CR or LF.
func (w *Writer) Simple(s string) { w.buf = redcon.AppendString(w.buf, s) }

// OK writes +OK.
func (w *Writer) OK() { w.buf = redcon.AppendOK(w.buf) }

// Error writes an error reply. msg starts with its code ("ERR ...", "NOAUTH ...").
func (w *Writer) Error(msg string) { w.buf = redcon.AppendError(w.buf, msg) }

// Null writes a null: "_" in RESP3, a null bulk string in RESP2.
func (w *Writer) Null() {
	if w.Proto() == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
		return
	}
	w.buf = redcon.AppendNull(w.buf)
}

// Raw appends bytes that are already RESP.
func (w *Writer) Raw(b []byte) { w.buf = append(w.buf, b...) }
