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
	w, used := uvarint(k)
	if used == 0 {
		return t, errBadKey
	}
	if w < 1 || w > uint64(MaxWindowMs) {
		return t, fmt.Errorf("%w: window %d out of range", errBadKey, w)
	}
	t.WindowMs = int64(w)
	rest := k[used:]
	var parts [2]string
	for i := range parts {
		n, used := uvarint(rest)
		switch {
		case used == 0:
			return t, errBadKey
		case n == 0:
			parts[i] = defaultName
		case n-1 > uint64(len(rest)-used):
			return t, errBadKey
		default:
			parts[i] = string(rest[used : used+int(n-1)])
			used += int(n - 1)
		}
		rest = rest[used:]
	}
	t.Workspace, t.Namespace, t.Key = parts[0], parts[1], rest
	return t, nil
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
