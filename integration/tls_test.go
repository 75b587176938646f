package integration

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testcert"
	"github.com/ratchet/ratchet/internal/testwait"
)

// nodeFiles are PEM files written for one test: a CA and a certificate for 127.0.0.1 it
// issued (good for both server and client authentication).
type nodeFiles struct {
	ca         *testcert.CA
	caFile     string
	cert, key  string
	clientOpts *redis.Options // go-redis over TLS, verifying against the CA
}

// writeNodeFiles makes a CA and a node certificate in a temporary directory.
func writeNodeFiles(t testing.TB) nodeFiles {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	certPEM, keyPEM := ca.IssuePEM(t, "127.0.0.1")
	f := nodeFiles{ca: ca, caFile: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node.key"),
		clientOpts: &redis.Options{TLSConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	for name, data := range map[string][]byte{f.caFile: ca.CertPEM(), f.cert: certPEM, f.key: keyPEM} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// startTLSEdge starts an edge of origin at tls://origin.Addr with extra flags.
func startTLSEdge(t testing.TB, origin *proc, extra ...string) *proc {
	t.Helper()
	args := []string{"--role", "edge", "--origin", "tls://" + origin.Addr, "--cluster-secret", clusterSecret,
		"--data-dir", "", "--max-memory", "32MiB"}
	return start(t, append(args, extra...)...)
}

// edgeDelivers has the edge allow cost 7 of key three times and waits until the origin,
// read over TLS, counts all 21.
func edgeDelivers(t testing.TB, edge *proc, origin *redis.Client, key string) {
	t.Helper()
	ec := edge.client(t, nil)
	w := regionWindow(t)
	for range 3 {
		allow(t, ec, true, key, 1000, w, "COST", 7)
	}
	waitCounts(t, 15*time.Second, "the origin to count the edge's 21", origin, key, w,
		func(c counts) bool { return c.regional == 21 })
}

// TestTLSEdgeToOrigin: an edge dials an origin serving TLS (--tls-cert) at tls://ADDR,
// verifying it against --cluster-ca, and replays to it; the origin is read over TLS.
func TestTLSEdgeToOrigin(t *testing.T) {
	t.Parallel()
	f := writeNodeFiles(t)
	origin := startOrigin(t, "--tls-cert", f.cert, "--tls-key", f.key)
	edge := startTLSEdge(t, origin, "--cluster-ca", f.caFile)
	waitReadyz(t, edge, http.StatusOK, "")
	edgeDelivers(t, edge, origin.client(t, f.clientOpts), "tls:edge")
}

// TestTLSEdgeRefusesUnverifiedOrigin: an edge whose --cluster-ca did not issue the origin's
// certificate, or with none (the system roots), does not connect: /readyz is 503 and the
// log says why.
func TestTLSEdgeRefusesUnverifiedOrigin(t *testing.T) {
	t.Parallel()
	f := writeNodeFiles(t)
	other := writeNodeFiles(t)
	origin := startOrigin(t, "--tls-cert", f.cert, "--tls-key", f.key)
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{name: "another CA", extra: []string{"--cluster-ca", other.caFile}},
		{name: "system roots", extra: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edge := startTLSEdge(t, origin, tt.extra...)
			waitReadyz(t, edge, http.StatusServiceUnavailable, "tls://"+origin.Addr+" unreachable")
			if log := edge.Log(); !strings.Contains(log, "certificate signed by unknown authority") {
				t.Fatalf("edge log does not say the certificate is unknown:\n%s", log)
			}
		})
	}
}

// TestTLSMutual: an origin with --cluster-client-ca refuses RL.INTERNAL.HELLO from an edge
// without a client certificate (NOPERM, /readyz 503) and the handshake of one whose
// certificate another CA issued, takes an edge with --cluster-cert/--cluster-key, and
// still serves an ordinary TLS client without a certificate.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	f := writeNodeFiles(t)
	other := writeNodeFiles(t)
	origin := startOrigin(t, "--tls-cert", f.cert, "--tls-key", f.key, "--cluster-client-ca", f.caFile)
	oc := origin.client(t, f.clientOpts)

	noCert := startTLSEdge(t, origin, "--cluster-ca", f.caFile)
	waitReadyz(t, noCert, http.StatusServiceUnavailable, "tls://"+origin.Addr)
	testwait.Until(t, 15*time.Second, "the edge without a certificate to log NOPERM", func() (bool, string) {
		return strings.Contains(noCert.Log(), "NOPERM"), noCert.logTail()
	})
	wrongCert := startTLSEdge(t, origin, "--cluster-ca", f.caFile, "--cluster-cert", other.cert, "--cluster-key", other.key)
	waitReadyz(t, wrongCert, http.StatusServiceUnavailable, "tls://"+origin.Addr+" unreachable")

	edge := startTLSEdge(t, origin, "--cluster-ca", f.caFile, "--cluster-cert", f.cert, "--cluster-key", f.key)
	waitReadyz(t, edge, http.StatusOK, "")
	edgeDelivers(t, edge, oc, "tls:mutual")
	allow(t, oc, true, "tls:client", 10, "1h") // a Redis client needs no certificate
}

// TestTLSRegions: two regions' origins peered at tls:// addresses, with mutual TLS, exchange
// their components both ways.
func TestTLSRegions(t *testing.T) {
	t.Parallel()
	f := writeNodeFiles(t)
	tlsFlags := []string{"--data-dir", "", "--tls-cert", f.cert, "--tls-key", f.key, "--cluster-ca", f.caFile,
		"--cluster-client-ca", f.caFile, "--cluster-cert", f.cert, "--cluster-key", f.key}
	addrs := map[string]string{"a": loopback(freePort(t)), "b": loopback(freePort(t))}
	pa := start(t, regionArgs("a", addrs["a"], map[string]string{"b": "tls://" + addrs["b"]}, tlsFlags...)...)
	pb := start(t, regionArgs("b", addrs["b"], map[string]string{"a": "tls://" + addrs["a"]}, tlsFlags...)...)
	a, b := pa.client(t, f.clientOpts), pb.client(t, f.clientOpts)
	waitPeersUp(t, map[string]*redis.Client{"a": a, "b": b})
	w := regionWindow(t)

	allow(t, a, true, "k", 100, w, "COST", 60)
	waitCounts(t, regionPoll, "B to import A's 60", b, "k", w, func(c counts) bool { return c.imported == 60 })
	allow(t, b, true, "k", 100, w, "COST", 40)
	waitCounts(t, regionPoll, "A to import B's 40", a, "k", w, func(c counts) bool { return c.imported == 40 && c.used == 100 })
	if v := peerField(t, a, "b", "addr"); v != "tls://"+addrs["b"] {
		t.Errorf("A's peer b addr=%s, want tls://%s", v, addrs["b"])
	}
}

// TestTLSRefusedAtStart: TLS settings that cannot work stop the start, before the node
// serves, with a message naming the flag.
func TestTLSRefusedAtStart(t *testing.T) {
	t.Parallel()
	f := writeNodeFiles(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	edge := []string{"--role", "edge", "--cluster-secret", "s", "--origin"}
	for _, tt := range []struct {
		name string
		args []string
		env  []string
		flag string
	}{
		{name: "edge CA missing", args: append(edge, "tls://127.0.0.1:1", "--cluster-ca", missing), flag: "--cluster-ca"},
		{name: "edge CA not PEM", args: append(edge, "tls://127.0.0.1:1", "--cluster-ca", f.key), flag: "--cluster-ca"},
		{name: "peer key missing", args: []string{"--peer", "b=tls://127.0.0.1:1", "--cluster-secret", "s",
			"--cluster-cert", f.cert, "--cluster-key", missing}, flag: "--cluster-key"},
		{name: "cert without key", args: append(edge, "tls://127.0.0.1:1"), env: []string{"RATCHET_CLUSTER_CERT=" + f.cert}, flag: "--cluster-cert"},
		{name: "client CA missing", args: []string{"--tls-cert", f.cert, "--tls-key", f.key, "--cluster-client-ca", missing}, flag: "--cluster-client-ca"},
		{name: "client CA without TLS", args: []string{"--cluster-client-ca", f.caFile}, flag: "--cluster-client-ca"},
		{name: "origin without port", args: append(edge, "tls://127.0.0.1"), flag: "--origin"},
		{name: "peer other scheme", args: []string{"--peer", "b=https://127.0.0.1:1", "--cluster-secret", "s"}, flag: "--peer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(tt.args, "--listen", loopback(freePort(t)), "--metrics-listen", "", "--data-dir", "")
			if out := refusedStart(t, tt.env, args...); !strings.Contains(out, tt.flag) || strings.Contains(out, "ratchet serving") {
				t.Fatalf("ratchet %v: output does not name %s before serving:\n%s", args, tt.flag, out)
			}
		})
	}
}
