package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/persist"
)

// loadCells restores the cells of snap, a snapshot with a part table whose seed eng
// adopted, part by part in the background (engine.LoadLazily: a request on a part not
// loaded yet loads it first), logs the totals once done, closes snap and gives the memory
// of the decoded records back. When parts fail to load, keepAside is called once, before
// the first save can replace the file (a save waits for the parts it reads).
func loadCells(eng *engine.Engine, snap *persist.Opened, keepAside func(error) error, log *slog.Logger) {
	start := time.Now()
	var kept sync.Once
	var loaded, dropped atomic.Int64
	var bufs sync.Pool // of *[]engine.CellRecord: parts load on several goroutines
	eng.ReserveTuples(snap.CellCount)
	done := eng.LoadLazily(func(from, to int, keep func(string) bool, keyHash uint64) {
		buf, _ := bufs.Get().(*[]engine.CellRecord)
		if buf == nil {
			buf = new([]engine.CellRecord)
		}
		recs, err := snap.Parts(from, to, *buf, keep, keyHash, func(recs []engine.CellRecord) {
			l, d, rerr := eng.Restore(recs)
			if rerr != nil {
				log.Warn("snapshot had unreadable cells", "parts_from", from, "parts_to", to, "error", rerr)
			}
			loaded.Add(int64(l))
			dropped.Add(int64(d))
		})
		if err != nil {
			log.Error("snapshot cells not loaded", "parts_from", from, "parts_to", to, "error", err)
			kept.Do(func() {
				if kerr := keepAside(err); kerr != nil {
					log.Error("snapshot cells not loaded, and no copy kept: the next save replaces the file", "error", kerr)
				}
			})
		}
		clear(recs) // no key left pointing into the file's mapping, unmapped once loaded
		*buf = recs[:0]
		bufs.Put(buf)
	})
	go func() {
		<-done
		if err := snap.Close(); err != nil {
			log.Warn("close snapshot", "error", err)
		}
		log.Info("snapshot cells loaded", "cells", loaded.Load(), "dropped", dropped.Load(),
			"duration", time.Since(start).Round(time.Millisecond))
		debug.FreeOSMemory()
	}()
}

// loadAhead loads cells of the lazy load going on (engine.LoadAhead) on every thread for
// d, or until a signal comes on sig, which it then returns; whole reports whether every
// cell is loaded.
func loadAhead(eng *engine.Engine, d time.Duration, sig <-chan os.Signal) (whole bool, s os.Signal) {
	stop, over := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stop) // after s is set: read once stop is closed
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case s = <-sig:
		case <-t.C:
		case <-over: // the load ended first
		}
	}()
	whole = eng.LoadAhead(stop, runtime.GOMAXPROCS(0))
	close(over)
	<-stop
	return whole, s
}

// stoppedError is newOrigin's when a signal stopped the origin while it loaded before
// listening.
type stoppedError struct{ sig os.Signal }

func (e *stoppedError) Error() string { return "stopped by " + e.sig.String() + " before listening" }
