package scripting

import lua "github.com/yuin/gopher-lua"

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
