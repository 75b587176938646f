package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/internal/testcert"
)

// TestClusterTLSFiles: the files are loaded before the node listens; one that cannot be
// read is named by its flag.
func TestClusterTLSFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := testcert.NewCA(t)
	certPEM, keyPEM := ca.IssuePEM(t, "127.0.0.1")
	caFile, certFile, keyFile := write("ca.pem", ca.CertPEM()), write("node.pem", certPEM), write("node.key", keyPEM)
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name  string
		cfg   Config
		check func(client, listener *tls.Config) bool
		err   string
	}{
		{name: "none", check: func(c, l *tls.Config) bool { return c.RootCAs == nil && len(c.Certificates) == 0 && l == nil }},
		{name: "all", cfg: Config{ClusterCA: caFile, ClusterCert: certFile, ClusterKey: keyFile, TLSCert: certFile, TLSKey: keyFile, ClusterClientCA: caFile},
			check: func(c, l *tls.Config) bool {
				return c.RootCAs != nil && len(c.Certificates) == 1 && l.ClientCAs != nil && l.ClientAuth == tls.VerifyClientCertIfGiven
			}},
		{name: "listener without client CA", cfg: Config{TLSCert: certFile, TLSKey: keyFile},
			check: func(c, l *tls.Config) bool { return l.ClientCAs == nil && l.ClientAuth == tls.NoClientCert }},
		{name: "missing CA", cfg: Config{ClusterCA: missing}, err: "--cluster-ca: open " + missing},
		{name: "CA not PEM", cfg: Config{ClusterCA: keyFile}, err: "--cluster-ca: no PEM certificate"},
		{name: "missing cert", cfg: Config{ClusterCert: missing, ClusterKey: keyFile}, err: "--cluster-cert " + missing},
		{name: "key of another cert", cfg: Config{ClusterCert: certFile, ClusterKey: write("other.key", func() []byte { _, k := ca.IssuePEM(t, "127.0.0.1"); return k }())},
			err: "--cluster-key"},
		{name: "missing client CA", cfg: Config{TLSCert: certFile, TLSKey: keyFile, ClusterClientCA: missing}, err: "--cluster-client-ca: open"},
		{name: "missing listener cert", cfg: Config{TLSCert: missing, TLSKey: keyFile}, err: "--tls-cert " + missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := clusterTLS(tt.cfg)
			var listener *tls.Config
			if err == nil {
				listener, err = listenerTLS(tt.cfg)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !tt.check(client, listener) {
				t.Fatalf("client %+v, listener %+v, err %v", client, listener, err)
			}
		})
	}
}
