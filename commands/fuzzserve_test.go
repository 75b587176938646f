package commands_test

import (
	"testing"

	"github.com/ratchet/ratchet/commands"
	"github.com/ratchet/ratchet/resp"
)

// checkServedAloneAndInMulti serves req alone, then as MULTI, req, EXEC, and fails unless
// the first gives exactly one RESP value and the transaction exactly three.
func checkServedAloneAndInMulti(t *testing.T, d *commands.Dispatcher, s *commands.Session, req [][]byte) {
	t.Helper()
	var w resp.Writer
	d.Serve(s, &w, req)
	checkOneReply(t, w.Bytes(), req)
	w.Reset()
	d.Serve(s, &w, [][]byte{[]byte("MULTI")})
	d.Serve(s, &w, req)
	d.Serve(s, &w, [][]byte{[]byte("EXEC")})
	rest := w.Bytes()
	for range 3 {
		n := replyLen(rest)
		if n < 0 {
			t.Fatalf("%q in MULTI: replies %q are not RESP", req, w.Bytes())
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("%q in MULTI: extra bytes %q", req, rest)
	}
}
