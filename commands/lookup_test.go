package commands_test

import "testing"

// TestLookupAfterRepeat: the last command's shortcut matches its name in any case and
// nothing else.
func TestLookupAfterRepeat(t *testing.T) {
	r := newRig("")
	for _, tt := range []struct{ cmd, want string }{
		{"PING", "+PONG\r\n"},
		{"pInG", "+PONG\r\n"},
		{"PINGX", "-ERR unknown command 'PINGX', with args beginning with: \r\n"},
		{"PIN", "-ERR unknown command 'PIN', with args beginning with: \r\n"},
		{"ECHO x", "$1\r\nx\r\n"},
		{"ping", "+PONG\r\n"},
		{"P\xc9NG", "-ERR unknown command 'P\xc9NG', with args beginning with: \r\n"},
		{"ping a b", "-ERR wrong number of arguments for 'ping' command\r\n"},
	} {
		if got := r.do(tt.cmd); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}
