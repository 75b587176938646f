package scripting

import (
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// openCjson returns lua-cjson's encode, decode and null as Redis loads them.
func openCjson(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	null := L.NewUserData() // cjson.null: JSON null in a table
	t.RawSetString("null", null)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	// The settings answer lua-cjson's defaults and change nothing: a script must not
	// change how the next one encodes.
	for name, vals := range map[string][]lua.LValue{
		"encode_keep_buffer": {lua.LTrue}, "encode_max_depth": {lua.LNumber(jsonMaxDepth)},
		"decode_max_depth": {lua.LNumber(jsonMaxDepth)}, "encode_number_precision": {lua.LNumber(14)},
		"encode_sparse_array":    {lua.LFalse, lua.LNumber(2), lua.LNumber(10)},
		"encode_invalid_numbers": {lua.LFalse}, "decode_invalid_numbers": {lua.LTrue},
	} {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			for _, v := range vals {
				L.Push(v)
			}
			return len(vals)
		}))
	}
	// new is lua_cjson_new: a fresh table each call (the same functions and null), so a
	// script that writes into it changes nothing another script, or a later run, reads.
	t.RawSetString("new", L.NewFunction(func(L *lua.LState) int {
		fresh := L.CreateTable(0, 16)
		t.ForEach(func(k, v lua.LValue) { fresh.RawSet(k, v) })
		L.Push(fresh)
		return 1
	}))
	t.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.ArgError(1, "expected 1 argument")
		}
		e := jsonEncoder{L: L, null: null}
		e.value(L.Get(1), 0)
		L.Push(lua.LString(e.b))
		return 1
	}))
	t.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		d := jsonDecoder{L: L, s: L.CheckString(1), null: null}
		v := d.value(0)
		d.space()
		if d.i < len(d.s) {
			d.fail("the end")
		}
		L.Push(v)
		return 1
	}))
	return t
}

const jsonMaxDepth = 1000

type jsonEncoder struct {
	L    *lua.LState
	b    []byte
	null *lua.LUserData
}

func (e *jsonEncoder) value(v lua.LValue, depth int) {
	switch v := v.(type) {
	case lua.LString:
		e.str(string(v))
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			e.L.RaiseError("Cannot serialise number: must not be NaN or Inf")
		}
		e.b = append(e.b, formatNumber(f)...)
	case lua.LBool:
		e.b = strconv.AppendBool(e.b, bool(v))
	case *lua.LNilType:
		e.b = append(e.b, "null"...)
	case *lua.LUserData:
		if v != e.null {
			e.L.RaiseError("Cannot serialise userdata: type not supported")
		}
		e.b = append(e.b, "null"...)
	case *lua.LTable:
		if depth >= jsonMaxDepth {
			e.L.RaiseError("Cannot serialise, excessive nesting (%d)", depth+1)
		}
		e.table(v, depth+1)
	default:
		e.L.RaiseError("Cannot serialise %s: type not supported", v.Type().String())
	}
}

// table writes an array when every key is a positive integer and the array is not
// excessively sparse (lua-cjson's defaults: ratio 2, safe 10), else an object.
func (e *jsonEncoder) table(t *lua.LTable, depth int) {
	max, items, array := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		items++
		n, ok := k.(lua.LNumber)
		if !ok || float64(n) != math.Floor(float64(n)) || n < 1 {
			array = false
			return
		}
		if int(n) > max {
			max = int(n)
		}
	})
	if array && max > 2*items && max > 10 {
		e.L.RaiseError("Cannot serialise table: excessively sparse array")
	}
	if array && items > 0 {
		e.b = append(e.b, '[')
		for i := 1; i <= max; i++ {
			if i > 1 {
				e.b = append(e.b, ',')
			}
			e.value(t.RawGetInt(i), depth)
		}
		e.b = append(e.b, ']')
		return
	}
	type kv struct {
		k string
		v lua.LValue
	}
	var kvs []kv
	t.ForEach(func(k, v lua.LValue) {
		switch k.(type) {
		case lua.LString, lua.LNumber:
			kvs = append(kvs, kv{luaString(k), v})
		default:
			e.L.RaiseError("Cannot serialise table: table key must be a number or string")
		}
	})
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k }) // a stable order
	e.b = append(e.b, '{')
	for i, p := range kvs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(p.k)
		e.b = append(e.b, ':')
		e.value(p.v, depth)
	}
	e.b = append(e.b, '}')
}

// str writes a JSON string as lua-cjson: '/' escaped, control bytes as \u00XX, other
// bytes as they are.
func (e *jsonEncoder) str(s string) {
	e.b = append(e.b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\', '/':
			e.b = append(e.b, '\\', c)
		case '\b':
			e.b = append(e.b, `\b`...)
		case '\f':
			e.b = append(e.b, `\f`...)
		case '\n':
			e.b = append(e.b, `\n`...)
		case '\r':
			e.b = append(e.b, `\r`...)
		case '\t':
			e.b = append(e.b, `\t`...)
		default:
			if c < 0x20 || c == 0x7f {
				e.b = append(e.b, `\u00`...)
				e.b = append(e.b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			} else {
				e.b = append(e.b, c)
			}
		}
	}
	e.b = append(e.b, '"')
}

type jsonDecoder struct {
	L    *lua.LState
	s    string
	i    int
	null *lua.LUserData
}

func (d *jsonDecoder) fail(what string) {
	d.L.RaiseError("Expected %s but found invalid token at character %d", what, d.i+1)
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

func (d *jsonDecoder) value(depth int) lua.LValue {
	d.space()
	if d.i >= len(d.s) {
		d.fail("value")
	}
	switch c := d.s[d.i]; {
	case c == '{' || c == '[':
		if depth >= jsonMaxDepth {
			d.L.RaiseError("Found too many nested data structures (%d) at character %d", depth+1, d.i+1)
		}
		if c == '{' {
			return d.object(depth + 1)
		}
		return d.array(depth + 1)
	case c == '"':
		return lua.LString(d.str())
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	for _, lit := range []struct {
		s string
		v lua.LValue
	}{{"true", lua.LTrue}, {"false", lua.LFalse}, {"null", d.null}} {
		if len(d.s)-d.i >= len(lit.s) && d.s[d.i:d.i+len(lit.s)] == lit.s {
			d.i += len(lit.s)
			return lit.v
		}
	}
	d.fail("value")
	return lua.LNil
}

func (d *jsonDecoder) object(depth int) lua.LValue {
	t := d.L.NewTable()
	d.items('}', "object end", func() {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			d.fail("object key string")
		}
		k := d.str()
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			d.fail("colon")
		}
		d.i++
		t.RawSetString(k, d.value(depth))
	})
	return t
}

func (d *jsonDecoder) array(depth int) lua.LValue {
	t := d.L.NewTable()
	d.items(']', "array end", func() { t.Append(d.value(depth)) })
	return t
}

// items reads the comma-separated items of an object or array after its opening bracket,
// up to and including end.
func (d *jsonDecoder) items(end byte, what string, item func()) {
	d.i++
	d.space()
	if d.i < len(d.s) && d.s[d.i] == end {
		d.i++
		return
	}
	for {
		item()
		d.space()
		if d.i < len(d.s) && d.s[d.i] == ',' {
			d.i++
			continue
		}
		if d.i < len(d.s) && d.s[d.i] == end {
			d.i++
			return
		}
		d.fail("comma or " + what)
	}
}

func (d *jsonDecoder) number() lua.LValue {
	start := d.i
	for d.i < len(d.s) && (d.s[d.i] == '-' || d.s[d.i] == '+' || d.s[d.i] == '.' || d.s[d.i] == 'e' ||
		d.s[d.i] == 'E' || d.s[d.i] >= '0' && d.s[d.i] <= '9') {
		d.i++
	}
	f, err := strconv.ParseFloat(d.s[start:d.i], 64)
	if err != nil && !math.IsInf(f, 0) {
		d.i = start
		d.fail("value")
	}
	return lua.LNumber(f)
}

// str reads a JSON string at d.i (the opening quote), \u escapes as UTF-8.
func (d *jsonDecoder) str() string {
	d.i++
	var b []byte
	for {
		if d.i >= len(d.s) {
			d.L.RaiseError("Expected string end but found end of string at character %d", d.i+1)
		}
		c := d.s[d.i]
		d.i++
		switch {
		case c == '"':
			return string(b)
		case c < 0x20:
			d.i--
			d.fail("string")
		case c != '\\':
			b = append(b, c)
			continue
		}
		if d.i >= len(d.s) {
			d.fail("escape")
		}
		c = d.s[d.i]
		d.i++
		switch c {
		case '"', '\\', '/':
			b = append(b, c)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := d.hex4()
			if r >= 0xd800 && r < 0xdc00 && d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
				d.i += 2
				lo := d.hex4()
				r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
			}
			b = utf8.AppendRune(b, rune(r))
		default:
			d.i -= 2
			d.fail("escape")
		}
	}
}

func (d *jsonDecoder) hex4() int {
	if len(d.s)-d.i < 4 {
		d.fail("unicode escape")
	}
	n, err := strconv.ParseUint(d.s[d.i:d.i+4], 16, 32)
	if err != nil {
		d.fail("unicode escape")
	}
	d.i += 4
	return int(n)
}
