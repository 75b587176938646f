package resp

import "strconv"

// Request encoding, for nodes that are clients of other nodes (package upstream, package
// replication): RESP arrays of bulk strings, appended without allocating.

// AppendArray appends an array header of n elements.
func AppendArray(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// AppendBulk appends s as a bulk string.
func AppendBulk(b, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBulkString appends s as a bulk string.
func AppendBulkString(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBulkInt appends v in decimal as a bulk string.
func AppendBulkInt(b []byte, v int64) []byte {
	var tmp [20]byte
	return AppendBulk(b, strconv.AppendInt(tmp[:0], v, 10))
}

// AppendBulkUint appends v in decimal as a bulk string.
func AppendBulkUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	return AppendBulk(b, strconv.AppendUint(tmp[:0], v, 10))
}

// AppendCommand appends a request of string arguments.
func AppendCommand(b []byte, args ...string) []byte {
	b = AppendArray(b, len(args))
	for _, a := range args {
		b = AppendBulkString(b, a)
	}
	return b
}
