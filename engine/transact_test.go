package engine_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestTransactMatchesSequential: a transaction decides and reads exactly as the same
// requests made one by one at the same instant.
func TestTransactMatchesSequential(t *testing.T) {
	tx, _ := newEngine(t0 + 250)
	seq, _ := newEngine(t0 + 250)
	var ops []engine.TxOp
	for i := range 300 {
		k := tup(fmt.Sprintf("k%d", i%7), 1000)
		ops = append(ops, engine.TxOp{Tuple: k, Limit: 20, Cost: uint64(i % 4), Read: i%5 == 0})
	}
	out := make([]engine.TxResult, len(ops))
	tx.Transact(ops, out)
	for i, op := range ops {
		if op.Read {
			if st := seq.Status(op.Tuple); st != out[i].Status {
				t.Fatalf("op %d: read %+v, sequential %+v", i, out[i].Status, st)
			}
			continue
		}
		d, err := seq.Limit(op.Tuple, op.Limit, op.Cost)
		if d != out[i].Decision || err != out[i].Err {
			t.Fatalf("op %d: %+v %v, sequential %+v %v", i, out[i].Decision, out[i].Err, d, err)
		}
	}
	if a, b := tx.Stats(), seq.Stats(); a.Allowed != b.Allowed || a.Denied != b.Denied || a.Cells != b.Cells {
		t.Fatalf("stats %+v, sequential %+v", a, b)
	}
}

// TestTransactFull: a decision that needs a cell past --max-memory gets ErrFull in its
// result, counted as refused, and the others still run.
func TestTransactFull(t *testing.T) {
	e := engine.New(engine.NewManualClock(t0), engine.Config{MaxMemoryBytes: 1000})
	var ops []engine.TxOp
	for i := range 20 {
		ops = append(ops, engine.TxOp{Tuple: tup(fmt.Sprintf("k%d", i), 1000), Limit: 5, Cost: 1})
	}
	out := make([]engine.TxResult, len(ops))
	e.Transact(ops, out)
	full := 0
	for _, r := range out {
		if errors.Is(r.Err, engine.ErrFull) {
			full++
		} else if !r.Decision.Allowed {
			t.Fatalf("a decision with room was denied: %+v", r)
		}
	}
	if full == 0 || full == len(ops) || e.Stats().RefusedFull != uint64(full) {
		t.Fatalf("%d of %d full, RefusedFull %d", full, len(ops), e.Stats().RefusedFull)
	}
}

// TestTransactConcurrent: transactions over overlapping keys, plain decisions and sweeps
// at once never deadlock, and no request falls between two ops of a transaction: each
// transaction's two decisions on one key leave consecutive remainings.
func TestTransactConcurrent(t *testing.T) {
	e := engine.New(engine.SystemClock{}, engine.Config{MaxMemoryBytes: 1 << 24})
	const workers, rounds = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]engine.TxResult, 4)
			for i := range rounds {
				hot := tup("hot", 86_400_000)
				other := tup(fmt.Sprintf("o%d", (w+i)%16), 86_400_000)
				ops := []engine.TxOp{{Tuple: other, Limit: 1 << 40, Cost: 1}, {Tuple: hot, Limit: 1 << 40, Cost: 1},
					{Tuple: tup(fmt.Sprintf("o%d", (w*7+i)%16), 86_400_000), Limit: 1 << 40, Cost: 1}, {Tuple: hot, Limit: 1 << 40, Cost: 1}}
				e.Transact(ops, out)
				if a, b := out[1].Decision.Remaining, out[3].Decision.Remaining; a != b+1 {
					errs <- fmt.Errorf("remainings %d then %d: another request fell between", a, b)
					return
				}
				if _, err := e.Limit(tup("hot", 86_400_000), 1<<40, 1); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					e.Sweep()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
