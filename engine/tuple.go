package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
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
//	window (8 bytes, big endian) | uvarint len(workspace) | workspace |
//	uvarint len(namespace) | namespace | key
func AppendKey(dst []byte, t Tuple) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.WindowMs))
	dst = binary.AppendUvarint(dst, uint64(len(t.Workspace)))
	dst = append(dst, t.Workspace...)
	dst = binary.AppendUvarint(dst, uint64(len(t.Namespace)))
	dst = append(dst, t.Namespace...)
	return append(dst, t.Key...)
}

var errBadKey = errors.New("malformed tuple key")

// ParseKey decodes a key made by AppendKey. Key in the result aliases k.
func ParseKey(k []byte) (Tuple, error) {
	var t Tuple
	if len(k) < 8 {
		return t, errBadKey
	}
	t.WindowMs = int64(binary.BigEndian.Uint64(k))
	if t.WindowMs < 1 || t.WindowMs > MaxWindowMs {
		return t, fmt.Errorf("%w: window %d out of range", errBadKey, t.WindowMs)
	}
	rest := k[8:]
	var parts [2]string
	for i := range parts {
		n, used := binary.Uvarint(rest)
		if used <= 0 || n > uint64(len(rest)-used) {
			return t, errBadKey
		}
		parts[i] = string(rest[used : used+int(n)])
		rest = rest[used+int(n):]
	}
	t.Workspace, t.Namespace, t.Key = parts[0], parts[1], rest
	return t, nil
}

// windowOfKey reads the window of a key made by AppendKey, or 0 when it is too short.
func windowOfKey(k string) int64 {
	if len(k) < 8 {
		return 0
	}
	var w uint64
	for i := 0; i < 8; i++ {
		w = w<<8 | uint64(k[i])
	}
	return int64(w)
}
