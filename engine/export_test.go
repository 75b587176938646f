package engine

// Test doors for the black-box tests (package engine_test); they are no part of the API.

// Sweep is one of RunSweeper's sweeps that also drops dead leases: it returns how many
// cells it dropped.
func (e *Engine) Sweep() int64 { return e.sweep(true) }

// ResetCancels returns how many cancelled values the reset record of tuple t holds (0:
// none), live or not.
func (e *Engine) ResetCancels(t Tuple) int {
	e.resets.mu.Lock()
	defer e.resets.mu.Unlock()
	if r := e.resets.m[string(AppendKey(nil, t))]; r != nil {
		return len(r.cancels)
	}
	return 0
}

// SetResetLimit lowers the most reset records the table holds (0: maxResets).
func (e *Engine) SetResetLimit(n int) {
	e.resets.mu.Lock()
	defer e.resets.mu.Unlock()
	e.resets.limit = n
}
