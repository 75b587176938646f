package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ratchet/ratchet/keyspace"
)

// Tuple is the unit of a limit: (workspace, namespace, key, window). Two requests with the
// same tuple share one count whatever limits they carry.
type Tuple struct {
	Workspace string
	Namespace string
	Key       []byte
	WindowMs  int64
}

// AppendKey appends t's canonical binary encoding to dst. The encoding is injective (any
// bytes may appear in any part) and starts with the window, so a stored key tells which
// window it belongs to without being decoded in full:
//
//	uvarint window | name(workspace) | name(namespace) | key
//
// where name(s) is the single byte 0 for "default" (the common case, and the name every
// connection starts with), else uvarint(len(s)+1) | s. "user:42" in default/default over
// 60 s takes 3+1+1+7 bytes.
func AppendKey(dst []byte, t Tuple) []byte {
	dst = binary.AppendUvarint(dst, uint64(t.WindowMs))
	dst = appendName(dst, t.Workspace)
	dst = appendName(dst, t.Namespace)
	return append(dst, t.Key...)
}

// defaultName is the workspace and namespace that encode as one zero byte.
const defaultName = "default"

// appendName encodes a workspace's or namespace's name as the keyspace does.
func appendName(dst []byte, s string) []byte { return keyspace.AppendName(dst, s) }

var errBadKey = errors.New("malformed tuple key")

// uvarint decodes a minimal uvarint from b: n, and the bytes it used (0 when malformed,
// truncated or not minimal, so that every accepted key re-encodes to itself).
func uvarint(b []byte) (uint64, int) {
	n, used := binary.Uvarint(b)
	if used <= 0 || (used > 1 && b[used-1] == 0) {
		return 0, 0
	}
	return n, used
}

// ParseKey decodes a key made by AppendKey. Key in the result aliases k.
func ParseKey(k []byte) (Tuple, error) {
	var t Tuple
	w, names, rest, err := splitKey(k)
	if err != nil {
		return t, err
	}
	t.WindowMs, t.Workspace, t.Namespace, t.Key = w, defaultName, defaultName, rest
	if names[0].set {
		t.Workspace = string(names[0].b)
	}
	if names[1].set {
		t.Namespace = string(names[1].b)
	}
	return t, nil
}

// keyName is a workspace's or namespace's name in a key (splitKey): b unless it is the
// default name (set false).
type keyName struct {
	b   []byte
	set bool
}

// splitKey splits a key made by AppendKey into its window, the names of its workspace and
// namespace, and the rest (the caller's key), aliasing k: ParseKey without the strings
// (Restore checks each record's key so, and needs only its window).
func splitKey(k []byte) (w int64, names [2]keyName, rest []byte, err error) {
	win, used := uvarint(k)
	if used == 0 {
		return 0, names, nil, errBadKey
	}
	if win < 1 || win > uint64(MaxWindowMs) {
		return 0, names, nil, fmt.Errorf("%w: window %d out of range", errBadKey, win)
	}
	rest = k[used:]
	for i := range names {
		n, used := uvarint(rest)
		switch {
		case used == 0:
			return 0, names, nil, errBadKey
		case n == 0:
		case n-1 > uint64(len(rest)-used):
			return 0, names, nil, errBadKey
		default:
			names[i] = keyName{b: rest[used : used+int(n-1)], set: true}
			used += int(n - 1)
		}
		rest = rest[used:]
	}
	return int64(win), names, rest, nil
}

// windowOfKey reads the window of a key made by AppendKey, or 0 when it has none in range.
func windowOfKey(k string) int64 {
	var w uint64
	for i := 0; i < len(k) && i < 10; i++ {
		b := k[i]
		w |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if w > uint64(MaxWindowMs) {
				return 0
			}
			return int64(w)
		}
	}
	return 0
}
