package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// Per-process memory beyond the cell store and the request budget, as the README's
// Memory bullet documents it.
const (
	connOverhead    = 20 << 10 // per --max-clients slot: 16 KiB of request buffer outside --max-query-buffer, and the connection's state
	runtimeOverhead = 64 << 20 // the binary, the Go runtime, metrics, replication and snapshot buffers
	// outsideGo is the part of runtimeOverhead that Go's memory limit does not see (the
	// binary's code and data as mapped): the limit is set this much below the bound.
	outsideGo = 32 << 20
)

// memoryBound is the memory the process is meant to stay within: --max-memory +
// --max-query-buffer + connOverhead per --max-clients slot + runtimeOverhead.
func memoryBound(c Config) int64 {
	return c.MaxMemory + c.MaxQueryBuffer + int64(c.MaxClients)*connOverhead + runtimeOverhead
}

// setMemoryLimit makes memoryBound, less outsideGo, Go's soft memory limit, so that the garbage of a flood
// (buffers of connections closed for --max-query-buffer, say) is collected before the
// process grows past it, rather than when the heap doubles. GOMEMLIMIT, when set, wins.
func setMemoryLimit(c Config, log *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		log.Info("memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return
	}
	debug.SetMemoryLimit(memoryBound(c) - outsideGo)
}
