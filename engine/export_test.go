package engine

// Test doors for the black-box tests (package engine_test); they are no part of the API.

// Sweep is one of RunSweeper's sweeps that also drops dead leases: it returns how many
// cells it dropped.
func (e *Engine) Sweep() int64 { return e.sweep(true) }
