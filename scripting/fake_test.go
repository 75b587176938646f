package scripting_test

import (
	"strconv"
	"strings"

	"github.com/ratchet/ratchet/scripting"
)

// fakeKeys is a Caller over an in-memory keyspace of strings and hashes: the few commands
// the vectors call, answering as redis-server does, with the errors Redis's scripting
// layer gives for an unknown command and a wrong arity.
type fakeKeys struct {
	strs   map[string]string
	hashes map[string][][2]string // field order kept, as a small Redis hash (listpack)
	calls  int
}

func newFake() *fakeKeys {
	return &fakeKeys{strs: map[string]string{}, hashes: map[string][][2]string{}}
}

// arity is Redis's: n exactly, or -n at least n.
var arity = map[string]int{"get": 2, "set": -3, "incr": 2, "del": -2, "hset": -4, "hgetall": 2, "ping": -1}

func (f *fakeKeys) Call(args [][]byte, proto int) (scripting.Reply, bool) {
	f.calls++
	name := strings.ToLower(string(args[0]))
	n, ok := arity[name]
	if !ok {
		return scripting.ErrorReply("ERR Unknown Redis command called from script"), false
	}
	if n > 0 && len(args) != n || n < 0 && len(args) < -n {
		return scripting.ErrorReply("ERR Wrong number of args calling Redis command from script"), false
	}
	switch name {
	case "ping":
		return scripting.StatusReply("PONG"), false
	case "get":
		v, ok := f.strs[string(args[1])]
		if !ok {
			return scripting.Reply{}, false
		}
		return scripting.BulkReply([]byte(v)), false
	case "set":
		f.strs[string(args[1])] = string(args[2])
		return scripting.StatusReply("OK"), true
	case "incr":
		v, _ := f.strs[string(args[1])]
		if v == "" {
			v = "0"
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return scripting.ErrorReply("ERR value is not an integer or out of range"), false
		}
		f.strs[string(args[1])] = strconv.FormatInt(i+1, 10)
		return scripting.IntReply(i + 1), true
	case "del":
		n := 0
		for _, k := range args[1:] {
			if _, ok := f.strs[string(k)]; ok {
				delete(f.strs, string(k))
				n++
			}
		}
		return scripting.IntReply(int64(n)), n > 0
	case "hset":
		k := string(args[1])
		added := 0
	fields:
		for i := 2; i+1 < len(args); i += 2 {
			for j, p := range f.hashes[k] {
				if p[0] == string(args[i]) {
					f.hashes[k][j][1] = string(args[i+1])
					continue fields
				}
			}
			f.hashes[k] = append(f.hashes[k], [2]string{string(args[i]), string(args[i+1])})
			added++
		}
		return scripting.IntReply(int64(added)), true
	case "hgetall":
		r := scripting.Reply{Kind: scripting.Array}
		if proto == 3 {
			r.Kind = scripting.Map
		}
		for _, p := range f.hashes[string(args[1])] {
			r.Elems = append(r.Elems, scripting.BulkReply([]byte(p[0])), scripting.BulkReply([]byte(p[1])))
		}
		return r, false
	}
	return scripting.ErrorReply("ERR unreachable"), false
}
