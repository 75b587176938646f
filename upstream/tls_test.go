package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testcert"
)

// tlsFront serves TLS with cfg and relays each connection, decrypted, to target; it
// returns the address.
func tlsFront(t *testing.T, cfg *tls.Config, target string) string {
	return testcert.Serve(t, cfg, func(c net.Conn) {
		back, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer back.Close()
		go func() { _, _ = io.Copy(back, c); _ = back.Close() }()
		_, _ = io.Copy(c, back)
	})
}

// TestTLSOrigin: a tls:// origin is dialled over TLS and verified against Config.TLS's
// roots; with other roots no request reaches it.
func TestTLSOrigin(t *testing.T) {
	ca := testcert.NewCA(t)
	f := newFake(t, "s")
	front := tlsFront(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1")}}, f.addr())
	tests := []struct {
		name  string
		roots *tls.Config
		err   string
	}{
		{name: "our CA", roots: &tls.Config{RootCAs: ca.Pool()}},
		{name: "another CA", roots: &tls.Config{RootCAs: testcert.NewCA(t).Pool()}, err: "unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hellos, _ := f.stats()
			c := newClient(t, "tls://"+front, Config{Secret: "s", TLS: tt.roots, DialTimeout: 10 * time.Second})
			_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
			_, after, _ := f.stats()
			if tt.err == "" {
				if err != nil || len(after) != len(hellos)+1 {
					t.Fatalf("read over TLS: %v (%d hellos before, %d after)", err, len(hellos), len(after))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || len(after) != len(hellos) {
				t.Fatalf("read error = %v, want %q and no HELLO (%d before, %d after)", err, tt.err, len(hellos), len(after))
			}
		})
	}
}

// TestNoPermHoldsOff: an origin refusing this node's link (NOPERM: no client certificate
// it requires) is a refusal like a wrong secret: calls within authRetryAfter fail at once
// with ErrAuth, without dialling again.
func TestNoPermHoldsOff(t *testing.T) {
	f := newFake(t, "s")
	f.helloErr = "NOPERM node links need a TLS client certificate verified against --cluster-client-ca"
	c := newClient(t, f.addr(), Config{Secret: "s"})
	for i := range 5 {
		_, _, err := c.Read(context.Background(), []engine.ReadItem{{Key: testKey, Seq: 1}})
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("call %d: error = %v, want ErrAuth with the origin's reply", i, err)
		}
	}
	if conns, _, _ := f.stats(); conns != 1 || !c.AuthRefused() {
		t.Fatalf("%d connections, AuthRefused %v; want 1 and true", conns, c.AuthRefused())
	}
}

// TestDialTimeoutDefaults: a tls:// origin gets the longer default, since its handshake
// adds round trips to the connect; a set DialTimeout is kept either way.
func TestDialTimeoutDefaults(t *testing.T) {
	for _, tc := range []struct {
		addr string
		set  time.Duration
		want time.Duration
	}{
		{"127.0.0.1:6380", 0, DefaultDialTimeout},
		{"tls://127.0.0.1:6380", 0, DefaultTLSDialTimeout},
		{"tls://127.0.0.1:6380", 3 * time.Second, 3 * time.Second},
		{"127.0.0.1:6380", 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		c := New(Config{Addr: tc.addr, DialTimeout: tc.set})
		if c.dialTimeout != tc.want {
			t.Errorf("New(%q, DialTimeout %v): dial timeout %v, want %v", tc.addr, tc.set, c.dialTimeout, tc.want)
		}
		_ = c.Close()
	}
}
