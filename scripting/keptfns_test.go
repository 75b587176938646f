package scripting_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// TestKeptFunctionsBounded: the main functions an interpreter keeps between runs (each
// holds its compiled script, constants included) do not outlive the script cache (SCRIPT
// FLUSH, an eviction), a long script is never kept, and the kept scripts' bodies total at
// most 1 MiB. One idle state, so every run shares it.
func TestKeptFunctionsBounded(t *testing.T) {
	// script returns the i-th distinct script whose body is about size bytes.
	script := func(i, size int) string {
		return "return #'" + strings.Repeat("x", size) + "' + " + strconv.Itoa(i)
	}
	tests := []struct {
		name    string
		cfg     scripting.Config
		scripts int
		size    int
		flush   bool
		max     int // main functions kept at most after the runs
	}{
		{name: "after SCRIPT FLUSH", scripts: 3, size: 10, flush: true, max: 0},
		// Each script evicts the one before: only the last, still cached, may be kept.
		{name: "evicted", cfg: scripting.Config{MaxScripts: 1}, scripts: 4, size: 10, max: 1},
		{name: "long body", scripts: 1, size: 65 << 10, max: 0},
		// 20 cached scripts of 60 KiB: at most 1 MiB of them kept.
		{name: "total bytes", scripts: 20, size: 60 << 10, max: (1 << 20) / (60 << 10)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.MaxIdle = 1
			e := scripting.New(tc.cfg)
			for i := 0; i < tc.scripts; i++ {
				if got, want := evalString(e, script(i, tc.size), nil, nil), ":"+strconv.Itoa(tc.size+i)+"\r\n"; got != want {
					t.Fatalf("script %d = %q, want %q", i, got, want)
				}
			}
			if tc.flush {
				e.Flush()
			}
			if n := scripting.KeptFunctions(e); n > tc.max {
				t.Errorf("the idle state keeps %d main functions, want at most %d", n, tc.max)
			}
		})
	}
}
