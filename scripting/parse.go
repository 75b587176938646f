package scripting

import (
	"errors"
	"strconv"
)

// ErrIncomplete is ParseReply's error for bytes that end inside a reply.
var ErrIncomplete = errors.New("scripting: incomplete reply")

// maxParseDepth bounds the nesting ParseReply accepts.
const maxParseDepth = 1024

// ParseReply reads one RESP2 or RESP3 reply from the start of b, as a command handler wrote
// it into a buffer: the commands layer's Caller turns its handlers' output into the Reply
// a script sees. It returns the reply and the bytes it took. The Reply's strings alias b.
// Aggregates claim no more elements than b has bytes left, and nest at most 1024 deep;
// RESP3 attributes are skipped as Redis's script client skips them.
func ParseReply(b []byte) (Reply, int, error) {
	return parseReply(b, 0)
}

func parseReply(b []byte, depth int) (Reply, int, error) {
	if depth > maxParseDepth {
		return Reply{}, 0, errors.New("scripting: reply nested too deep")
	}
	line, n, err := replyLine(b)
	if err != nil {
		return Reply{}, 0, err
	}
	typ, text := line[0], line[1:]
	switch typ {
	case '+':
		return Reply{Kind: Status, Str: text}, n, nil
	case '-':
		return Reply{Kind: Error, Str: text}, n, nil
	case '(':
		return Reply{Kind: BigNumber, Str: text}, n, nil
	case '_':
		return Reply{}, n, nil
	case '#':
		return Reply{Kind: Bool, Int: boolInt(len(text) == 1 && text[0] == 't')}, n, nil
	case ',':
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return Reply{}, 0, errors.New("scripting: bad double " + strconv.Quote(string(text)))
		}
		return Reply{Kind: Double, Float: f}, n, nil
	}
	count, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		return Reply{}, 0, errors.New("scripting: bad reply header " + strconv.Quote(string(line)))
	}
	switch typ {
	case ':':
		return IntReply(count), n, nil
	case '$', '=':
		if count < 0 {
			return Reply{}, n, nil
		}
		if count > int64(len(b)-n-2) {
			return Reply{}, 0, ErrIncomplete
		}
		kind := Bulk
		if typ == '=' {
			kind = Verbatim
		}
		return Reply{Kind: kind, Str: b[n : n+int(count)]}, n + int(count) + 2, nil
	case '*', '~', '%', '|', '>':
		if count < 0 {
			return Reply{}, n, nil // a RESP2 null array
		}
		elems := count
		if typ == '%' || typ == '|' {
			elems *= 2
		}
		if elems > int64(len(b)-n) { // each element takes 3 bytes at least
			return Reply{}, 0, ErrIncomplete
		}
		r := Reply{Kind: Array, Elems: make([]Reply, 0, elems)}
		switch typ {
		case '~':
			r.Kind = Set
		case '%':
			r.Kind = Map
		}
		for range elems {
			e, m, err := parseReply(b[n:], depth+1)
			if err != nil {
				return Reply{}, 0, err
			}
			r.Elems = append(r.Elems, e)
			n += m
		}
		if typ == '|' { // an attribute: the reply is what follows it
			next, m, err := parseReply(b[n:], depth+1)
			return next, n + m, err
		}
		return r, n, nil
	}
	return Reply{}, 0, errors.New("scripting: unknown reply type " + strconv.QuoteRune(rune(typ)))
}

// replyLine returns the first line of b without its CRLF and the bytes it takes.
func replyLine(b []byte) ([]byte, int, error) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			if i == 0 {
				return nil, 0, errors.New("scripting: empty reply line")
			}
			return b[:i], i + 2, nil
		}
	}
	return nil, 0, ErrIncomplete
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
