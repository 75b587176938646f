package scripting

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// openBit returns LuaBitOp's bit table, as Redis loads it: 32-bit operations whose results
// are signed.
func openBit(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			r := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				r = op(r, tobit(L, i))
			}
			L.Push(lua.LNumber(int32(r)))
			return 1
		}
	}
	shift := func(op func(a uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(int32(op(tobit(L, 1), uint(tobit(L, 2)&31)))))
			return 1
		}
	}
	fns := map[string]lua.LGFunction{
		"tobit":   fold(nil),
		"bnot":    func(L *lua.LState) int { L.Push(lua.LNumber(int32(^tobit(L, 1)))); return 1 },
		"band":    fold(func(a, b uint32) uint32 { return a & b }),
		"bor":     fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":    fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift":  shift(func(a uint32, n uint) uint32 { return a << n }),
		"rshift":  shift(func(a uint32, n uint) uint32 { return a >> n }),
		"arshift": shift(func(a uint32, n uint) uint32 { return uint32(int32(a) >> n) }),
		"rol":     shift(func(a uint32, n uint) uint32 { return a<<n | a>>(32-n) }),
		"ror":     shift(func(a uint32, n uint) uint32 { return a>>n | a<<(32-n) }),
		"bswap": func(L *lua.LState) int {
			b := tobit(L, 1)
			L.Push(lua.LNumber(int32(b>>24 | b>>8&0xff00 | b<<8&0xff0000 | b<<24)))
			return 1
		},
		"tohex": func(L *lua.LState) int {
			b := tobit(L, 1)
			n := int32(8)
			if L.GetTop() >= 2 {
				n = int32(tobit(L, 2))
			}
			upper := n < 0
			if upper {
				n = -n
			}
			if n > 8 || n < 0 {
				n = 8
			}
			s := strconv.FormatUint(uint64(b), 16)
			if len(s) < 8 {
				s = strings.Repeat("0", 8-len(s)) + s
			}
			s = s[8-n:]
			if upper {
				s = strings.ToUpper(s)
			}
			L.Push(lua.LString(s))
			return 1
		},
	}
	fns["tobit"] = func(L *lua.LState) int { L.Push(lua.LNumber(int32(tobit(L, 1)))); return 1 }
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}

// tobit is LuaBitOp's conversion of argument i: rounded to an integer, modulo 2^32.
func tobit(L *lua.LState, i int) uint32 {
	f := float64(L.CheckNumber(i))
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	f = math.RoundToEven(math.Mod(f, 1<<32))
	return uint32(int64(f))
}
