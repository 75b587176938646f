package upstream

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// TestChanges: Changes sends RL.INTERNAL.CHANGES since and decodes the bulk reply; a
// malformed reply is a protocol error that closes the connection.
func TestChanges(t *testing.T) {
	want := engine.ChangesReply{Version: 12, Changes: []engine.Change{{Version: 11, Kind: engine.ChangeReset, Key: testKey},
		{Version: 12, Kind: 9, Key: []byte{}, Fields: []int64{-3}}}}
	f := newFake(t, "s")
	f.setHandler(func(args []string) answer {
		if args[0] != wire.CmdChanges || len(args) != 2 {
			return answer{reply: "-ERR unexpected\r\n"}
		}
		if args[1] == "99" {
			return answer{reply: "$2\r\n\x00\x07\r\n"} // resync 7: malformed
		}
		var w resp.Writer
		wire.WriteChangesReply(&w, want)
		return answer{reply: string(w.Bytes())}
	})
	c := newClient(t, f.addr(), Config{Secret: "s"})
	got, err := c.Changes(context.Background(), 10)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Changes = %+v, %v; want %+v", got, err, want)
	}
	if _, err := c.Changes(context.Background(), 99); err == nil {
		t.Fatalf("a malformed reply was accepted")
	}
	if _, err := c.Changes(context.Background(), 10); err != nil {
		t.Fatalf("after a malformed reply: %v", err)
	}
	if conns, _, cmds := f.stats(); conns != 2 || cmds[0][1] != strconv.Itoa(10) {
		t.Fatalf("%d connections, first command %q; want 2, since 10", conns, cmds[0])
	}
}
