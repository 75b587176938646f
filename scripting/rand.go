package scripting

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// rand48 is Redis's PRNG (rand.c, the 48-bit linear congruential generator of drand48):
// math.random gives the same numbers as on Redis, which reseeds it with 0 before each
// script.
type rand48 struct{ x uint64 }

const rand48Max = math.MaxInt32

func (r *rand48) seed(s int32) { r.x = uint64(uint32(s))<<16 | 0x330E }

func (r *rand48) next() int32 {
	r.x = (0x5DEECE66D*r.x + 0xB) & (1<<48 - 1)
	return int32(r.x >> 17)
}

// random is Redis's math.random.
func (st *state) random(L *lua.LState) int {
	r := float64(st.rand.next()%rand48Max) / rand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (st *state) randomseed(L *lua.LState) int {
	st.rand.seed(int32(L.CheckInt(1)))
	return 0
}
