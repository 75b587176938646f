package scripting

import (
	"math"
	"strconv"
)

// Kind tells what a Reply holds: the RESP2 and RESP3 reply types a command or a script
// can answer.
type Kind uint8

// The kinds of Reply.
const (
	Null      Kind = iota // RESP2 null bulk string, RESP3 null ("_")
	Status                // simple string: Str
	Error                 // error: Str, its code first ("ERR ...")
	Int                   // integer: Int
	Bulk                  // bulk string: Str
	Array                 // array: Elems
	Map                   // RESP3 map: Elems holds key, value, key, value...; RESP2 writes a flat array
	Set                   // RESP3 set: Elems; RESP2 writes an array
	Double                // RESP3 double: Float; RESP2 writes it as a bulk string
	Bool                  // RESP3 boolean: Int 0 or 1; RESP2 writes :1 for true and a null for false
	BigNumber             // RESP3 big number: Str (decimal digits); RESP2 writes a bulk string
	Verbatim              // RESP3 verbatim string: Str is "fmt:text"; RESP2 writes text as a bulk string
)

// Reply is one RESP reply as a value: what a Caller returns for one command, and what a
// script answers. The zero value is a null.
type Reply struct {
	Kind  Kind
	Str   []byte  // Status, Error, Bulk, BigNumber, Verbatim
	Int   int64   // Int, Bool
	Float float64 // Double
	Elems []Reply // Array, Set; Map as key, value pairs
}

// StatusReply, ErrorReply, IntReply and BulkReply build the simple replies.
func StatusReply(s string) Reply { return Reply{Kind: Status, Str: []byte(s)} }

// ErrorReply returns an error reply; msg starts with its code ("ERR ...").
func ErrorReply(msg string) Reply { return Reply{Kind: Error, Str: []byte(msg)} }

// IntReply returns an integer reply.
func IntReply(n int64) Reply { return Reply{Kind: Int, Int: n} }

// BulkReply returns a bulk string reply holding b (not copied).
func BulkReply(b []byte) Reply { return Reply{Kind: Bulk, Str: b} }

// IsError reports whether r is an error reply.
func (r Reply) IsError() bool { return r.Kind == Error }

// Append appends r to b in RESP2 (proto 2) or RESP3 (proto 3), as Redis writes each type to
// a client of that protocol, and returns the extended buffer.
func (r Reply) Append(b []byte, proto int) []byte {
	resp3 := proto == 3
	switch r.Kind {
	case Null:
		if resp3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case Status:
		return appendLine(append(b, '+'), r.Str)
	case Error:
		return appendLine(append(b, '-'), r.Str)
	case Int:
		return appendInt(b, ':', r.Int)
	case Bulk:
		return appendBulk(b, r.Str)
	case Array, Set, Map:
		n := len(r.Elems)
		c := byte('*')
		switch {
		case resp3 && r.Kind == Set:
			c = '~'
		case resp3 && r.Kind == Map:
			c, n = '%', n/2
		}
		b = appendInt(b, c, int64(n))
		for _, e := range r.Elems {
			b = e.Append(b, proto)
		}
		return b
	case Double:
		s := formatDouble(r.Float)
		if resp3 {
			return append(append(append(b, ','), s...), '\r', '\n')
		}
		return appendBulk(b, []byte(s))
	case Bool:
		switch {
		case resp3 && r.Int != 0:
			return append(b, "#t\r\n"...)
		case resp3:
			return append(b, "#f\r\n"...)
		case r.Int != 0:
			return append(b, ":1\r\n"...)
		}
		return append(b, ":0\r\n"...)
	case BigNumber:
		if resp3 {
			return appendLine(append(b, '('), r.Str)
		}
		return appendBulk(b, r.Str)
	case Verbatim:
		if resp3 {
			b = appendInt(b, '=', int64(len(r.Str)))
			return append(append(b, r.Str...), '\r', '\n')
		}
		text := r.Str
		if len(text) >= 4 && text[3] == ':' {
			text = text[4:]
		}
		return appendBulk(b, text)
	}
	return append(b, "$-1\r\n"...)
}

// appendLine appends s and CRLF, CR and LF in s written as spaces (a simple string or an
// error is one line).
func appendLine(b, s []byte) []byte {
	for _, c := range s {
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

func appendInt(b []byte, c byte, n int64) []byte {
	b = strconv.AppendInt(append(b, c), n, 10)
	return append(b, '\r', '\n')
}

func appendBulk(b, s []byte) []byte {
	b = appendInt(b, '$', int64(len(s)))
	return append(append(b, s...), '\r', '\n')
}

// formatDouble formats a double as Redis 7.0's addReplyDouble: "%.17g", inf, -inf, nan.
func formatDouble(f float64) string {
	if s, ok := nonFinite(f); ok {
		return s
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// nonFinite formats infinities and NaN as C's printf does.
func nonFinite(f float64) (string, bool) {
	switch {
	case math.IsInf(f, 1):
		return "inf", true
	case math.IsInf(f, -1):
		return "-inf", true
	case math.IsNaN(f):
		return "nan", true
	}
	return "", false
}
