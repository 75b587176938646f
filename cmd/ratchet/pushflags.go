package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// pushLimit is --pubsub-output-limit: Redis's client-output-buffer-limit pubsub class,
// "hard soft seconds" with Redis's memory units (32mb is 32 MiB, 32m 32 million bytes). A
// connection whose pushed messages (pub/sub, invalidations) wait unread past hard bytes,
// or past soft bytes for seconds, is closed. hard 0 means Ratchet's bound of 1 GiB (it
// keeps every buffer bounded); soft 0 none.
type pushLimit struct {
	Hard, Soft int
	SoftFor    time.Duration
}

// defaultPushLimit is Redis's default for the pubsub class.
var defaultPushLimit = pushLimit{Hard: 32 << 20, Soft: 8 << 20, SoftFor: 60 * time.Second}

func (p *pushLimit) String() string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%d %d %d", p.Hard, p.Soft, int(p.SoftFor/time.Second))
}

func (p *pushLimit) Set(v string) error {
	f := strings.Fields(v)
	if len(f) != 3 {
		return fmt.Errorf("want \"hard soft seconds\", e.g. \"32mb 8mb 60\", not %q", v)
	}
	hard, err1 := redisMemory(f[0])
	soft, err2 := redisMemory(f[1])
	secs, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || secs < 0 {
		return fmt.Errorf("want \"hard soft seconds\", e.g. \"32mb 8mb 60\", not %q", v)
	}
	if hard == 0 {
		hard = 1 << 30
	}
	p.Hard, p.Soft, p.SoftFor = int(min(hard, 1<<40)), int(min(soft, 1<<40)), time.Duration(secs)*time.Second
	return nil
}

// redisMemory reads a size as Redis's memtoll: b, k/kb, m/mb, g/gb (k = 1000, kb = 1024).
func redisMemory(s string) (int64, error) { return scaled(s, redisUnits, 1<<50) }

// redisUnits are Redis's memory units (memtoll), unlike --max-memory's.
var redisUnits = []sizeUnit{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}}
