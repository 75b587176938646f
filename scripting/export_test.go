package scripting

import (
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// BuildsArgTable reports whether a call of body's compiled main chunk builds Lua 5.0's
// implicit `arg` table (gopher-lua's VarArgNeedsArg), compiling body into e's cache.
func BuildsArgTable(e *Engine, body string) bool {
	s, msg := e.compile([]byte(body))
	if s == nil {
		panic(msg)
	}
	return s.proto.IsVarArg&lua.VarArgNeedsArg != 0
}

// CachedBodies returns how many scripts e finds by their text, and by their SHA1.
func CachedBodies(e *Engine) (byBody, bySHA int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.bodies), len(e.scripts)
}

// KeptFunctions returns how many main functions e's idle states keep.
func KeptFunctions(e *Engine) int {
	n := 0
	for _, st := range e.drainIdle() {
		n += len(st.fns)
		e.put(st)
	}
	return n
}

// CallBuffers returns, over e's idle states, the redis.call arguments their reused buffer
// still points at, and the bytes of that buffer and of the number buffer.
func CallBuffers(e *Engine) (pinned, argsBytes, numBytes int) {
	for _, st := range e.drainIdle() {
		for _, a := range st.callArgs[:cap(st.callArgs)] {
			if a != nil {
				pinned++
			}
		}
		argsBytes += cap(st.callArgs) * int(unsafe.Sizeof([]byte(nil)))
		numBytes += cap(st.num)
		e.put(st)
	}
	return pinned, argsBytes, numBytes
}

// IdleStates returns how many interpreter states e keeps for reuse.
func IdleStates(e *Engine) int {
	idle := e.drainIdle()
	for _, st := range idle {
		e.put(st)
	}
	return len(idle)
}
