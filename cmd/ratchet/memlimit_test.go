package main

import "testing"

func TestMemoryBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want int64
	}{
		{"defaults", DefaultConfig(), 256<<20 + 64<<20 + 10000*20<<10 + 64<<20},
		{"small", Config{MaxMemory: 64 << 20, MaxQueryBuffer: 64 << 20, MaxClients: 1100}, 64<<20 + 64<<20 + 1100*20<<10 + 64<<20},
	} {
		if got := memoryBound(tc.cfg); got != tc.want {
			t.Errorf("%s: memoryBound = %d, want %d", tc.name, got, tc.want)
		}
	}
}
