package scripting_test

import (
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// TestIdleStateKeepsNoCallArgs: after a script, the idle interpreter's reused redis.call
// buffers point at none of the script's strings (a 64 MiB argument would stay alive with
// the state), and neither buffer keeps more than 64 KiB from the largest call it served.
func TestIdleStateKeepsNoCallArgs(t *testing.T) {
	tests := []struct{ name, body string }{
		{"strings", "redis.call('set', 'k', string.rep('x', 1024)) return 1"},
		{"argument type error", "redis.call('ping', 'a', 'b') redis.pcall('set', 'k', 'v', {}) return 1"},
		{"raised error", "redis.pcall('set', 'k') return 1"},
		{"many numbers", "local t = {} for i = 1, 5000 do t[i] = 1e15 + i end redis.call('del', unpack(t)) return 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := scripting.New(scripting.Config{MaxIdle: 1})
			if got := evalString(e, tc.body, nil, nil); got != ":1\r\n" {
				t.Fatalf("script = %q, want :1", got)
			}
			pinned, argsBytes, numBytes := scripting.CallBuffers(e)
			if pinned != 0 {
				t.Errorf("the idle state's call buffer points at %d arguments, want 0", pinned)
			}
			if argsBytes > 64<<10 || numBytes > 64<<10 {
				t.Errorf("the idle state keeps call buffers of %d and %d bytes, want at most 64 KiB each", argsBytes, numBytes)
			}
		})
	}
}
