package scripting

import (
	"encoding/binary"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// openStruct returns Roberto Ierusalimschy's struct library as Redis loads it: pack,
// unpack and size of binary strings. Formats: < > = (endianness), ! (alignment), x (pad),
// b B h H l L T i[n] I[n] (integers), c[n] (fixed string; c0 takes its size from the
// previous value), s (zero-terminated), f d (floats).
func openStruct(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(structPack))
	t.RawSetString("unpack", L.NewFunction(structUnpack))
	t.RawSetString("size", L.NewFunction(structSize))
	return t
}

const structMaxInt = 32 // MAXINTSIZE

// structItem is one option of a format.
type structItem struct {
	op   byte
	size int
}

// structFormat walks a format, calling fn for each item with its alignment padding.
type structFormat struct {
	s        string
	i        int
	little   bool
	maxAlign int
}

func (f *structFormat) num(L *lua.LState, def int) int {
	if f.i >= len(f.s) || f.s[f.i] < '0' || f.s[f.i] > '9' {
		return def
	}
	n := 0
	for f.i < len(f.s) && f.s[f.i] >= '0' && f.s[f.i] <= '9' {
		n = n*10 + int(f.s[f.i]-'0')
		if n > 1<<20 {
			L.RaiseError("size too large")
		}
		f.i++
	}
	return n
}

// next returns the next data item, handling the options that are not data; ok is false at
// the end.
func (f *structFormat) next(L *lua.LState) (it structItem, ok bool) {
	for f.i < len(f.s) {
		op := f.s[f.i]
		f.i++
		switch op {
		case ' ':
		case '<', '=':
			f.little = true
		case '>':
			f.little = false
		case '!':
			f.maxAlign = f.num(L, 8)
		case 'x', 'b', 'B':
			return structItem{op, 1}, true
		case 'h', 'H':
			return structItem{op, 2}, true
		case 'l', 'L', 'T', 'd':
			return structItem{op, 8}, true
		case 'f':
			return structItem{op, 4}, true
		case 'i', 'I':
			n := f.num(L, 4)
			if n > structMaxInt {
				L.RaiseError("integral size %d is larger than limit of %d", n, structMaxInt)
			}
			return structItem{op, n}, true
		case 'c':
			return structItem{op, f.num(L, 1)}, true
		case 's':
			return structItem{op, 0}, true
		default:
			L.RaiseError("invalid format option '%c'", op)
		}
	}
	return structItem{}, false
}

// pad returns the alignment padding before an item of size at offset pos.
func (f *structFormat) pad(it structItem, pos int) int {
	a := it.size
	if it.op == 'c' || it.op == 's' || it.op == 'x' || a <= 1 || f.maxAlign <= 1 {
		return 0
	}
	if a > f.maxAlign {
		a = f.maxAlign
	}
	if a&(a-1) != 0 {
		return 0
	}
	return (a - pos&(a-1)) & (a - 1)
}

func structPack(L *lua.LState) int {
	f := &structFormat{s: L.CheckString(1), little: true, maxAlign: 1}
	var b []byte
	arg := 2
	for {
		it, ok := f.next(L)
		if !ok {
			break
		}
		b = append(b, make([]byte, f.pad(it, len(b)))...)
		switch it.op {
		case 'x':
			b = append(b, 0)
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			n := float64(L.CheckNumber(arg))
			arg++
			var v uint64
			if n < 0 {
				v = uint64(int64(n))
			} else {
				v = uint64(n)
			}
			b = putInt(b, v, it.size, f.little)
		case 'f':
			var tmp [4]byte
			order(f.little).PutUint32(tmp[:], math.Float32bits(float32(L.CheckNumber(arg))))
			arg++
			b = append(b, tmp[:]...)
		case 'd':
			var tmp [8]byte
			order(f.little).PutUint64(tmp[:], math.Float64bits(float64(L.CheckNumber(arg))))
			arg++
			b = append(b, tmp[:]...)
		case 'c':
			s := L.CheckString(arg)
			size := it.size
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				L.ArgError(arg, "string too short")
			}
			arg++
			b = append(b, s[:size]...)
		case 's':
			s := L.CheckString(arg)
			if strings.IndexByte(s, 0) >= 0 {
				L.ArgError(arg, "string contains zeros")
			}
			arg++
			b = append(append(b, s...), 0)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func putInt(b []byte, v uint64, size int, little bool) []byte {
	start := len(b)
	for i := 0; i < size; i++ {
		var c byte
		if i < 8 {
			c = byte(v >> (8 * i))
		} else if int64(v) < 0 {
			c = 0xff
		}
		b = append(b, c)
	}
	if !little {
		s := b[start:]
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
	}
	return b
}

func order(little bool) binary.ByteOrder {
	if little {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

func structUnpack(L *lua.LState) int {
	f := &structFormat{s: L.CheckString(1), little: true, maxAlign: 1}
	data := L.CheckString(2)
	pos := L.OptInt(3, 1) - 1
	if pos < 0 || pos > len(data) {
		L.ArgError(3, "offset must be 1 or greater")
	}
	n := 0
	for {
		it, ok := f.next(L)
		if !ok {
			break
		}
		pos += f.pad(it, pos)
		size := it.size
		if it.op == 'c' && size == 0 {
			prev, isNum := L.Get(-1).(lua.LNumber)
			if n == 0 || !isNum {
				L.RaiseError("format 'c0' needs a previous size")
			}
			size = int(prev)
			L.Pop(1)
			n--
			if size < 0 {
				L.ArgError(2, "data string too short")
			}
		}
		if it.op == 's' {
			end := strings.IndexByte(data[pos:], 0)
			if end < 0 {
				L.RaiseError("unfinished string in data")
			}
			L.Push(lua.LString(data[pos : pos+end]))
			n++
			pos += end + 1
			continue
		}
		if size > len(data)-pos {
			L.ArgError(2, "data string too short")
		}
		chunk := data[pos : pos+size]
		pos += size
		switch it.op {
		case 'x':
			continue
		case 'c':
			L.Push(lua.LString(chunk))
		case 'f':
			L.Push(lua.LNumber(math.Float32frombits(order(f.little).Uint32([]byte(chunk)))))
		case 'd':
			L.Push(lua.LNumber(math.Float64frombits(order(f.little).Uint64([]byte(chunk)))))
		default:
			L.Push(lua.LNumber(getInt(chunk, f.little, it.op >= 'a')))
		}
		n++
	}
	L.Push(lua.LNumber(pos + 1))
	return n + 1
}

// getInt reads an integer of len(s) bytes; signed ones are sign-extended.
func getInt(s string, little, signed bool) float64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !little {
			c = s[len(s)-1-i]
		}
		if i < 8 {
			v |= uint64(c) << (8 * i)
		}
	}
	if signed {
		if len(s) < 8 && len(s) > 0 {
			shift := 64 - 8*uint(len(s))
			return float64(int64(v<<shift) >> shift)
		}
		return float64(int64(v))
	}
	return float64(v)
}

func structSize(L *lua.LState) int {
	f := &structFormat{s: L.CheckString(1), little: true, maxAlign: 1}
	pos := 0
	for {
		it, ok := f.next(L)
		if !ok {
			break
		}
		if it.op == 's' || it.op == 'c' && it.size == 0 {
			L.ArgError(1, "options 'c0' - 's' have undefined sizes")
		}
		pos += f.pad(it, pos) + it.size
	}
	L.Push(lua.LNumber(pos))
	return 1
}
