package commands

import (
	"bytes"
	"errors"
	"slices"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// Argument errors. Their text is the reply; each names the argument and its rule.
var (
	errSyntax    = errors.New("ERR syntax error")
	errKey       = errors.New("ERR key must be 1 to 1024 bytes")
	errLimit     = errors.New("ERR limit must be an integer from 1 to 1125899906842624")
	errWindow    = errors.New("ERR window must be from 1ms to 31d")
	errCost      = errors.New("ERR cost must be an integer from 0 to 1125899906842624")
	errNamespace = errors.New("ERR namespace must be 1 to 128 bytes")
	errNotInt    = errors.New("ERR value is not an integer or out of range")
)

const (
	maxKeyLen       = 1024
	maxNamespaceLen = 128
	// DefaultNamespace is the namespace of a request without NS.
	DefaultNamespace = "default"
)

// parseUint is resp.ParseUint: a strict non-negative decimal integer of at most max.
func parseUint(b []byte, max uint64) (uint64, bool) { return resp.ParseUint(b, max) }

// windowUnit splits a window into its digits and the milliseconds of its unit suffix
// ("ms", "s", "m", "h", "d", any case; none: ms). A suffix needs at least one byte before
// it. Anything else is left in digits, which then fail to parse.
func windowUnit(b []byte) (unit int64, digits []byte) {
	n := len(b)
	if n < 2 {
		return 1, b
	}
	switch b[n-1] | 0x20 { // ASCII lower case; digits and other bytes match no case
	case 's':
		if n > 2 && b[n-2]|0x20 == 'm' {
			return 1, b[:n-2]
		}
		return 1000, b[:n-1]
	case 'm':
		return 60_000, b[:n-1]
	case 'h':
		return 3_600_000, b[:n-1]
	case 'd':
		return 86_400_000, b[:n-1]
	}
	return 1, b
}

// ParseWindow reads a window: whole milliseconds ("1500") or a whole number with a unit
// ("1500ms", "60s", "1m", "1h", "1d"; units are case-insensitive). It accepts 1ms to 31d.
func ParseWindow(b []byte) (int64, error) {
	unit, digits := windowUnit(b)
	n, ok := parseUint(digits, uint64(engine.MaxWindowMs))
	if !ok || n == 0 || int64(n) > engine.MaxWindowMs/unit {
		return 0, errWindow
	}
	return int64(n) * unit, nil
}

// LimitArgs are the parsed arguments of RL.LIMIT.
type LimitArgs struct {
	Key       []byte
	Limit     uint64
	WindowMs  int64
	Cost      uint64
	Namespace []byte // nil: the default namespace
}

// ParseLimit parses "key limit window [COST n] [NS namespace]" (the arguments after the
// command name). Checks run in argument order; the first failure is returned.
func ParseLimit(args [][]byte) (LimitArgs, error) {
	var a LimitArgs
	if len(args) < 3 {
		return a, errSyntax
	}
	if err := checkKey(args[0]); err != nil {
		return a, err
	}
	a.Key = args[0]
	var ok bool
	if a.Limit, ok = parseUint(args[1], engine.MaxLimit); !ok || a.Limit == 0 {
		return a, errLimit
	}
	var err error
	if a.WindowMs, err = ParseWindow(args[2]); err != nil {
		return a, err
	}
	a.Cost = 1
	if len(args) > 3 {
		a.Cost, a.Namespace, err = parseLimitOptions(args[3:])
	}
	return a, err
}

// StatusArgs are the parsed arguments of RL.STATUS.
type StatusArgs struct {
	Key       []byte
	WindowMs  int64
	Namespace []byte // nil: the default namespace
	Limit     uint64 // 0: no LIMIT given
}

// ParseStatus parses "key window [NS namespace] [LIMIT n]".
func ParseStatus(args [][]byte) (StatusArgs, error) {
	var a StatusArgs
	if len(args) < 2 {
		return a, errSyntax
	}
	if err := checkKey(args[0]); err != nil {
		return a, err
	}
	a.Key = args[0]
	var err error
	if a.WindowMs, err = ParseWindow(args[1]); err != nil {
		return a, err
	}
	var seenLimit, seenNS bool
	for rest := args[2:]; len(rest) > 0; rest = rest[2:] {
		if len(rest) < 2 {
			return a, errSyntax
		}
		switch {
		case bytes.EqualFold(rest[0], []byte("LIMIT")) && !seenLimit:
			seenLimit = true
			var ok bool
			if a.Limit, ok = parseUint(rest[1], engine.MaxLimit); !ok || a.Limit == 0 {
				return a, errLimit
			}
		case bytes.EqualFold(rest[0], []byte("NS")) && !seenNS:
			seenNS = true
			if a.Namespace, err = checkNamespace(rest[1]); err != nil {
				return a, err
			}
		default:
			return a, errSyntax
		}
	}
	return a, nil
}

func checkKey(k []byte) error {
	if len(k) < 1 || len(k) > maxKeyLen {
		return errKey
	}
	return nil
}

func checkNamespace(ns []byte) ([]byte, error) {
	if len(ns) < 1 || len(ns) > maxNamespaceLen {
		return nil, errNamespace
	}
	return ns, nil
}

// maxResetWindows bounds the windows of one RL.RESET.
const maxResetWindows = 64

// ResetArgs are the parsed arguments of RL.RESET.
type ResetArgs struct {
	Key       []byte
	Windows   []int64 // distinct, in the request's order
	Namespace []byte  // nil: the default namespace
}

// ParseReset parses "key window [window ...] [NS namespace]". A window named twice counts
// once.
func ParseReset(args [][]byte) (ResetArgs, error) {
	var a ResetArgs
	if len(args) < 2 {
		return a, errSyntax
	}
	if err := checkKey(args[0]); err != nil {
		return a, err
	}
	a.Key = args[0]
	rest := args[1:]
	for len(rest) > 0 && !bytes.EqualFold(rest[0], []byte("NS")) {
		w, err := ParseWindow(rest[0])
		if err != nil {
			return a, err
		}
		if !slices.Contains(a.Windows, w) {
			if len(a.Windows) == maxResetWindows {
				return a, errors.New("ERR RL.RESET takes at most 64 windows")
			}
			a.Windows = append(a.Windows, w)
		}
		rest = rest[1:]
	}
	if len(a.Windows) == 0 {
		return a, errSyntax
	}
	switch {
	case len(rest) == 0:
	case len(rest) == 2:
		var err error
		if a.Namespace, err = checkNamespace(rest[1]); err != nil {
			return a, err
		}
	default:
		return a, errSyntax
	}
	return a, nil
}
