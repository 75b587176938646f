package scripting

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// openMsgpack returns lua-cmsgpack's pack and unpack as Redis loads them.
func openMsgpack(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(func(L *lua.LState) int {
		n := L.GetTop()
		if n == 0 {
			L.ArgError(0, "MessagePack pack needs input.")
		}
		var b []byte
		for i := 1; i <= n; i++ {
			b = mpEncode(b, L.Get(i), 0)
		}
		L.Push(lua.LString(b))
		return 1
	}))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int { return mpUnpack(L, 0, 0, false) }))
	t.RawSetString("unpack_one", L.NewFunction(func(L *lua.LState) int { return mpUnpack(L, 1, L.OptInt(2, 0), true) }))
	t.RawSetString("unpack_limit", L.NewFunction(func(L *lua.LState) int {
		return mpUnpack(L, L.CheckInt(2), L.OptInt(3, 0), true)
	}))
	for name, v := range map[string]string{"_NAME": "cmsgpack", "_VERSION": "lua-cmsgpack 0.4.0",
		"_COPYRIGHT": "Copyright (C) 2012, Salvatore Sanfilippo", "_DESCRIPTION": "MessagePack C implementation for Lua"} {
		t.RawSetString(name, lua.LString(v))
	}
	return t
}

const mpMaxNesting = 16 // LUACMSGPACK_MAX_NESTING: deeper tables are packed as nil

func mpEncode(b []byte, v lua.LValue, depth int) []byte {
	switch v := v.(type) {
	case lua.LString:
		return mpString(b, string(v))
	case lua.LBool:
		if v {
			return append(b, 0xc3)
		}
		return append(b, 0xc2)
	case lua.LNumber:
		f := float64(v)
		if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
			return mpInt(b, int64(f))
		}
		if float64(float32(f)) == f {
			return binary.BigEndian.AppendUint32(append(b, 0xca), math.Float32bits(float32(f)))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
	case *lua.LTable:
		if depth >= mpMaxNesting {
			return append(b, 0xc0)
		}
		return mpTable(b, v, depth+1)
	}
	return append(b, 0xc0)
}

func mpString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n < 128:
		return append(b, byte(n))
	case n >= 0 && n <= 0xff:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// mpTable packs an array when the keys are exactly 1..n, else a map.
func mpTable(b []byte, t *lua.LTable, depth int) []byte {
	n, max, array := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		n++
		f, ok := k.(lua.LNumber)
		if !ok || float64(f) != math.Trunc(float64(f)) || f < 1 {
			array = false
		} else if int(f) > max {
			max = int(f)
		}
	})
	if array && max == n {
		b = mpHeader(b, n, 0x90, 0xdc)
		for i := 1; i <= n; i++ {
			b = mpEncode(b, t.RawGetInt(i), depth)
		}
		return b
	}
	b = mpHeader(b, n, 0x80, 0xde)
	t.ForEach(func(k, v lua.LValue) {
		b = mpEncode(mpEncode(b, k, depth), v, depth)
	})
	return b
}

func mpHeader(b []byte, n int, fix, c16 byte) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c16+1), uint32(n))
}

// mpUnpack decodes up to limit values (all when limit <= 0) from offset. unpack_one and
// unpack_limit (withOffset) answer first the offset to continue from, -1 at the end.
func mpUnpack(L *lua.LState, limit, offset int, withOffset bool) int {
	s := L.CheckString(1)
	if offset < 0 || limit < 0 {
		L.RaiseError("Invalid request to unpack with offset of %d and limit of %d.", offset, limit)
	}
	if offset > len(s) {
		L.RaiseError("Start offset %d greater than input length %d.", offset, len(s))
	}
	d := mpDecoder{L: L, s: s, i: offset}
	top := L.GetTop()
	n := 0
	for d.i < len(d.s) && (limit == 0 || n < limit) {
		L.Push(d.value(0))
		n++
	}
	if withOffset {
		next := d.i
		if next == len(s) {
			next = -1
		}
		L.Insert(lua.LNumber(next), top+1)
		n++
	}
	return n
}

type mpDecoder struct {
	L *lua.LState
	s string
	i int
}

func (d *mpDecoder) need(n int) string {
	if n < 0 || len(d.s)-d.i < n {
		d.L.RaiseError("Missing bytes in input.")
	}
	s := d.s[d.i : d.i+n]
	d.i += n
	return s
}

func (d *mpDecoder) uint(n int) uint64 {
	s := d.need(n)
	var v uint64
	for i := 0; i < n; i++ {
		v = v<<8 | uint64(s[i])
	}
	return v
}

func (d *mpDecoder) value(depth int) lua.LValue {
	if depth > 1000 {
		d.L.RaiseError("Bad data format in input.")
	}
	c := d.need(1)[0]
	switch {
	case c < 0x80:
		return lua.LNumber(c)
	case c >= 0xe0:
		return lua.LNumber(int8(c))
	case c&0xe0 == 0xa0:
		return lua.LString(d.need(int(c & 0x1f)))
	case c&0xf0 == 0x90:
		return d.array(int(c&0x0f), depth)
	case c&0xf0 == 0x80:
		return d.mapOf(int(c&0x0f), depth)
	}
	switch c {
	case 0xc0:
		return lua.LNil
	case 0xc2:
		return lua.LFalse
	case 0xc3:
		return lua.LTrue
	case 0xcc, 0xcd, 0xce, 0xcf:
		return lua.LNumber(d.uint(1 << (c - 0xcc)))
	case 0xd0:
		return lua.LNumber(int8(d.uint(1)))
	case 0xd1:
		return lua.LNumber(int16(d.uint(2)))
	case 0xd2:
		return lua.LNumber(int32(d.uint(4)))
	case 0xd3:
		return lua.LNumber(int64(d.uint(8)))
	case 0xca:
		return lua.LNumber(math.Float32frombits(uint32(d.uint(4))))
	case 0xcb:
		return lua.LNumber(math.Float64frombits(d.uint(8)))
	case 0xd9, 0xc4:
		return lua.LString(d.need(int(d.uint(1))))
	case 0xda, 0xc5:
		return lua.LString(d.need(int(d.uint(2))))
	case 0xdb, 0xc6:
		return lua.LString(d.need(int(d.uint(4))))
	case 0xdc:
		return d.array(int(d.uint(2)), depth)
	case 0xdd:
		return d.array(int(d.uint(4)), depth)
	case 0xde:
		return d.mapOf(int(d.uint(2)), depth)
	case 0xdf:
		return d.mapOf(int(d.uint(4)), depth)
	}
	d.L.RaiseError("Bad data format in input.")
	return lua.LNil
}

func (d *mpDecoder) array(n int, depth int) lua.LValue {
	if n > len(d.s)-d.i { // every element takes at least one byte
		d.L.RaiseError("Missing bytes in input.")
	}
	t := d.L.CreateTable(n, 0)
	for i := 1; i <= n; i++ {
		t.RawSetInt(i, d.value(depth+1))
	}
	return t
}

func (d *mpDecoder) mapOf(n int, depth int) lua.LValue {
	if n > (len(d.s)-d.i)/2 {
		d.L.RaiseError("Missing bytes in input.")
	}
	t := d.L.CreateTable(0, n)
	for i := 0; i < n; i++ {
		k := d.value(depth + 1)
		v := d.value(depth + 1)
		if k != lua.LNil {
			t.RawSet(k, v)
		}
	}
	return t
}
