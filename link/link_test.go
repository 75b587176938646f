package link_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/internal/testcert"
	"github.com/ratchet/ratchet/link"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in       string
		hostPort string
		host     string
		tls      bool
		err      string
	}{
		{in: "127.0.0.1:7001", hostPort: "127.0.0.1:7001", host: "127.0.0.1"},
		{in: "tls://127.0.0.1:7001", hostPort: "127.0.0.1:7001", host: "127.0.0.1", tls: true},
		{in: "TLS://origin.example:6380", hostPort: "origin.example:6380", host: "origin.example", tls: true},
		{in: "origin.example:6380", hostPort: "origin.example:6380", host: "origin.example"},
		{in: "[::1]:7001", hostPort: "[::1]:7001", host: "::1"},
		{in: "tls://[::1]:7001", hostPort: "[::1]:7001", host: "::1", tls: true},
		{in: "tls://[fe80::1%eth0]:7001", hostPort: "[fe80::1%eth0]:7001", host: "fe80::1%eth0", tls: true},
		{in: ":7001", hostPort: ":7001", host: ""}, // plain: the local host, as net.Dial has it
		{in: "tls://:7001", err: "needs the host"},
		{in: "127.0.0.1", err: "missing port"},
		{in: "tls://127.0.0.1", err: "missing port"},
		{in: "tls://", err: "missing port"},
		{in: "", err: "missing port"},
		{in: "::1:7001", err: "too many colons"},
		{in: "tls://::1:7001", err: "too many colons"},
		{in: "127.0.0.1:0", err: "port"},
		{in: "127.0.0.1:65536", err: "port"},
		{in: "127.0.0.1:redis", err: "port"},
		{in: "127.0.0.1:", err: "port"},
		{in: "tcp://127.0.0.1:7001", err: "want host:port or tls://host:port"},
		{in: "rediss://127.0.0.1:7001", err: "want host:port or tls://host:port"},
		{in: "tls://127.0.0.1:7001/", err: "want host:port or tls://host:port"},
		{in: "tls://user@127.0.0.1:7001", err: "want host:port or tls://host:port"},
		{in: "tls:// 127.0.0.1:7001", err: "want host:port or tls://host:port"},
		{in: "tls:/127.0.0.1:7001", err: "want host:port or tls://host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := link.ParseAddr(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseAddr(%q) = %+v, %v; want an error containing %q", tt.in, a, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAddr(%q): %v", tt.in, err)
			}
			if a.HostPort != tt.hostPort || a.TLS != tt.tls || a.Host() != tt.host {
				t.Fatalf("ParseAddr(%q) = %+v (host %q); want %q tls=%v host %q", tt.in, a, a.Host(), tt.hostPort, tt.tls, tt.host)
			}
			if again, err := link.ParseAddr(a.String()); err != nil || again != a {
				t.Fatalf("ParseAddr(%q.String() = %q) = %+v, %v; want %+v", tt.in, a.String(), again, err, a)
			}
		})
	}
}

// FuzzParseAddr: any address that parses writes itself back to one that parses the same,
// and a TLS address always has a host to verify.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7001", "tls://127.0.0.1:7001", "tls://[::1]:1", "[::1]:65535",
		"tls://", "tls://:1", "x://y:1", "tls://a:b:c", "TLS://host:0", "tls://[::1%25en0]:7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := link.ParseAddr(s)
		if err != nil {
			return
		}
		if a.TLS && a.Host() == "" {
			t.Fatalf("ParseAddr(%q) = %+v: a TLS address without a host", s, a)
		}
		again, err := link.ParseAddr(a.String())
		if err != nil || again != a {
			t.Fatalf("ParseAddr(%q) = %+v; its String %q parses to %+v, %v", s, a, a.String(), again, err)
		}
	})
}

// serveTLS serves TLS with cfg and writes "ok" on each connection after its handshake; it
// returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	return testcert.Serve(t, cfg, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if c.(*tls.Conn).Handshake() == nil {
			_, _ = c.Write([]byte("ok"))
		}
	})
}

func TestDialVerifiesTheHost(t *testing.T) {
	ca := testcert.NewCA(t)
	srvCfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1")}}
	addr := serveTLS(t, srvCfg)
	_, port, _ := net.SplitHostPort(addr)

	tests := []struct {
		name string
		addr string
		tls  *tls.Config
		err  string
	}{
		{name: "our CA", addr: "tls://" + addr, tls: &tls.Config{RootCAs: ca.Pool()}},
		{name: "system roots", addr: "tls://" + addr, err: "certificate"},
		{name: "another CA", addr: "tls://" + addr, tls: &tls.Config{RootCAs: testcert.NewCA(t).Pool()}, err: "unknown authority"},
		{name: "host not in the certificate", addr: "tls://localhost:" + port, tls: &tls.Config{RootCAs: ca.Pool()}, err: "localhost"},
		{name: "ServerName of the config ignored", addr: "tls://localhost:" + port,
			tls: &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}, err: "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := link.ParseAddr(tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			d := link.Dialer{Net: net.Dialer{Timeout: 10 * time.Second}, TLS: tt.tls}
			c, err := d.Dial(context.Background(), a)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Dial(%s) error = %v, want one containing %q", tt.addr, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial(%s): %v", tt.addr, err)
			}
			defer c.Close()
			buf := make([]byte, 2)
			if _, err := c.Read(buf); err != nil || string(buf) != "ok" {
				t.Fatalf("read %q, %v; want ok", buf, err)
			}
		})
	}
}

func TestLoadCertPool(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := link.LoadCertPool(good)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(ca.Issue(t, "127.0.0.1").Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Fatalf("a certificate of the CA does not verify against the loaded pool: %v", err)
	}
	if _, err := link.LoadCertPool(notPEM); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("LoadCertPool(not PEM) error = %v", err)
	}
	if _, err := link.LoadCertPool(filepath.Join(dir, "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadCertPool(missing) error = %v, want not exist", err)
	}
}
