package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOverrideMergeLetsLookupsIn: a merge of many records (a peer's anti-entropy, an
// edge's full read) does not hold the write lock throughout: a reader (a decision's
// lookup) gets the read lock while the merge is under way.
func TestOverrideMergeLetsLookupsIn(t *testing.T) {
	const total = 100 * scanChunk
	o := NewOverrides(NewManualClock(1000), "a", total)
	recs := make([]OverrideRecord, total)
	for i := range recs {
		tu := Tuple{Workspace: "default", Namespace: "default", Key: []byte(fmt.Sprintf("k%06d", i)), WindowMs: 1000}
		recs[i] = OverrideRecord{Key: AppendKey(nil, tu), Limit: 5, Stamp: uint64(i + 1), Region: "b"}
	}
	var changes atomic.Int64
	var in atomic.Bool              // the reader holds, or held, the read lock
	wait := 10 * time.Millisecond   // for a reader not in yet at a chunk's start
	readerIn := make(chan int64, 1) // the changes made when the reader got in; total: only after the merge
	o.onChange = func(*override) {
		switch n := changes.Add(1); {
		case n == 1:
			// From the first change on (the write lock held), a reader waits for the read
			// lock. A reader blocked in RLock gets it at the writer's next Unlock, before
			// any later Lock.
			calling := make(chan struct{})
			go func() {
				close(calling)
				o.mu.RLock()
				in.Store(true)
				n := changes.Load() // the merge cannot move while the read lock is held
				o.mu.RUnlock()
				readerIn <- n
			}()
			<-calling
		case n%scanChunk == 1 && !in.Load():
			// A chunk begins and the reader is not in yet: its thread has not reached
			// RLock (once blocked there, it is in at the first Unlock, before this
			// chunk's Lock). Time for it, under the write lock: 10 ms at the first such
			// chunk, twice as long at each next one, a second at most (over a minute in
			// all across the 99 chunks, for a loaded machine); it then gets in at this
			// chunk's end. On a machine that runs it at once, no chunk waits.
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
		}
	}
	if n := o.Merge(recs); n != total {
		t.Fatalf("merged %d, want %d", n, total)
	}
	if got := <-readerIn; got >= total {
		t.Errorf("a reader got the read lock only after the %d changes of the merge: it held the write lock throughout", got)
	}
}

// TestOverrideLookupTakesNoLock: a lookup (every decision on a tuple, once there are
// overrides) is answered while the table's write lock is held, and sees the last write.
func TestOverrideLookupTakesNoLock(t *testing.T) {
	o := NewOverrides(NewManualClock(1000), "a", 0)
	tu := Tuple{Workspace: "default", Namespace: "default", Key: []byte("user:42"), WindowMs: 1000}
	if err := o.Set(Tuple{Workspace: "default", Namespace: "default", Key: []byte("user:"), WindowMs: 1000}, true, 9); err != nil {
		t.Fatal(err)
	}
	if err := o.Set(tu, false, 5); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock() // a writer in the middle of a change
	defer o.mu.Unlock()
	got := make(chan uint64, 1)
	go func() {
		l, _ := o.Lookup(tu)
		got <- l
	}()
	select {
	case l := <-got:
		if l != 5 {
			t.Errorf("lookup: limit %d, want 5", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a lookup waited for the table's write lock")
	}
}

// TestOverrideLookupIndexConsistent: after concurrent SETs, DELs and merges of exact keys
// and prefixes (lookups running meanwhile), every lookup agrees with the table.
func TestOverrideLookupIndexConsistent(t *testing.T) {
	o := NewOverrides(NewManualClock(1000), "a", 0)
	tuple := func(ns string, key string) Tuple {
		return Tuple{Workspace: "default", Namespace: ns, Key: []byte(key), WindowMs: 1000}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				ns := fmt.Sprint("ns", i%3)
				key := fmt.Sprintf("u:%d:%d", w, i%200)
				prefix := i%7 == 0
				if prefix {
					key = fmt.Sprintf("u:%d:", i%5)
				}
				switch i % 4 {
				case 3:
					o.Delete(tuple(ns, key), prefix)
				case 2:
					o.Merge([]OverrideRecord{{Key: AppendKey(nil, tuple(ns, key)), Prefix: prefix, Limit: uint64(i + 1),
						Stamp: uint64(i) << 20, Region: fmt.Sprint("r", w)}})
				default:
					_ = o.Set(tuple(ns, key), prefix, uint64(i+1))
				}
			}
		}()
	}
	go func() { // lookups meanwhile: the race detector checks them
		for {
			select {
			case <-stop:
				return
			default:
				o.Lookup(tuple("ns1", "u:1:17"))
			}
		}
	}()
	wg.Wait()
	close(stop)
	for ns := range 3 {
		for w := range 3 {
			for i := range 200 {
				tu := tuple(fmt.Sprint("ns", ns), fmt.Sprintf("u:%d:%d", w, i))
				want, wok := o.Get(tu, false)
				if !wok { // the longest live prefix's, read from the records
					for n := len(tu.Key); n >= 0 && !wok; n-- {
						want, wok = o.Get(Tuple{Workspace: tu.Workspace, Namespace: tu.Namespace, Key: tu.Key[:n], WindowMs: tu.WindowMs}, true)
					}
				}
				got, gok := o.Lookup(tu)
				if got != want || gok != wok {
					t.Fatalf("%s %s: lookup %d %v, table %d %v", tu.Namespace, tu.Key, got, gok, want, wok)
				}
			}
		}
	}
}
