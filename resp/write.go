package resp

import "github.com/tidwall/redcon"

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
func (w *Writer) Int(n int64) { w.buf = appendLine(w.buf, ':', n) }

// Array writes the header of an array of n elements.
func (w *Writer) Array(n int) { w.buf = appendLine(w.buf, '*', int64(n)) }

// Map writes the header of a map of n pairs: a RESP3 map, or in RESP2 a flat array of 2n.
func (w *Writer) Map(n int) {
	if w.Proto() == 3 {
		w.buf = appendLine(w.buf, '%', int64(n))
		return
	}
	w.Array(2 * n)
}

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.buf = appendLine(w.buf, '$', int64(len(b)))
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\r', '\n')
}

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) {
	w.buf = appendLine(w.buf, '$', int64(len(s)))
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

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

// NullArray writes a null array (EXEC of a transaction whose watched keys changed): "_"
// in RESP3, "*-1" in RESP2.
func (w *Writer) NullArray() {
	if w.Proto() == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
		return
	}
	w.buf = append(w.buf, '*', '-', '1', '\r', '\n')
}

// Push writes the header of an out-of-band message of n elements (pub/sub, invalidation):
// a RESP3 push (">"), an array in RESP2.
func (w *Writer) Push(n int) {
	if w.Proto() == 3 {
		w.buf = appendLine(w.buf, '>', int64(n))
		return
	}
	w.Array(n)
}

// Raw appends bytes that are already RESP.
func (w *Writer) Raw(b []byte) { w.buf = append(w.buf, b...) }

// digitPairs holds "00" to "99": the decimal digits of n%100 are digitPairs[2*(n%100):][:2].
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendLine appends the line c, n in decimal, CRLF: an integer reply (':'), or an
// aggregate or bulk header ('*', '%', '$'). It is strconv.AppendInt without the base
// dispatch, written back to front into a stack buffer and appended in one copy: the
// replies of RL.LIMIT are five of these, on every request.
func appendLine(b []byte, c byte, n int64) []byte {
	if n >= 0 && n < 10 {
		return append(b, c, byte('0'+n), '\r', '\n')
	}
	var tmp [24]byte // c, '-', 19 digits, CRLF
	i := len(tmp) - 2
	tmp[i], tmp[i+1] = '\r', '\n'
	u := uint64(n)
	if n < 0 {
		u = -u // math.MinInt64 too: its magnitude is 1<<63 as a uint64
	}
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		r := u * 2
		i -= 2
		tmp[i], tmp[i+1] = digitPairs[r], digitPairs[r+1]
	} else {
		i--
		tmp[i] = byte('0' + u)
	}
	if n < 0 {
		i--
		tmp[i] = '-'
	}
	i--
	tmp[i] = c
	return append(b, tmp[i:]...)
}
