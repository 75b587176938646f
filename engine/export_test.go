package engine

// Test doors for the black-box tests (package engine_test); they are no part of the API.

// Sweep is one of RunSweeper's sweeps that also drops dead leases: it returns how many
// cells it dropped.
func (e *Engine) Sweep() int64 { return e.sweep(true) }

// ResetCancels returns how many cancelled values the reset record of tuple t holds (0:
// none), live or not.
func (e *Engine) ResetCancels(t Tuple) int {
	key := AppendKey(nil, t)
	sh, _ := e.store.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r := e.resetOf(string(key)); r != nil {
		return len(r.cancels)
	}
	return 0
}

// SetResetLimit lowers the most reset records the table holds (0: maxResets).
func (e *Engine) SetResetLimit(n int) { e.resets.limit.Store(int64(n)) }
