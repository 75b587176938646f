// Package link dials the connections between nodes: an edge's to its origins (package
// upstream) and an origin's to other regions' origins (package replication). An address
// written tls://host:port is dialled over TLS and the node's certificate verified for host;
// host:port is plain TCP.
package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// tlsScheme is the prefix of an address dialled over TLS.
const tlsScheme = "tls://"

// Addr is a parsed node address.
type Addr struct {
	HostPort string // host:port to dial, IPv6 hosts in brackets
	TLS      bool   // dial over TLS and verify the certificate for Host
}

// ParseAddr parses host:port or tls://host:port. The port is a number from 1 to 65535; a
// TLS address needs a host, the name its certificate is verified for. Any other scheme,
// a path, or spaces are refused.
func ParseAddr(s string) (Addr, error) {
	a := Addr{HostPort: s}
	if len(s) >= len(tlsScheme) && strings.EqualFold(s[:len(tlsScheme)], tlsScheme) {
		a.HostPort, a.TLS = s[len(tlsScheme):], true
	} else if strings.Contains(s, "://") {
		return Addr{}, fmt.Errorf("address %q: want host:port or tls://host:port", s)
	}
	if strings.ContainsAny(a.HostPort, "/?#@ \t\r\n") {
		return Addr{}, fmt.Errorf("address %q: want host:port or tls://host:port", s)
	}
	host, port, err := net.SplitHostPort(a.HostPort)
	if err != nil {
		why := err.Error()
		if ae, ok := err.(*net.AddrError); ok {
			why = ae.Err // without the address, named already
		}
		return Addr{}, fmt.Errorf("address %q: %s", s, why)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Addr{}, fmt.Errorf("address %q: port %q is not a number from 1 to 65535", s, port)
	}
	if a.TLS && host == "" {
		return Addr{}, fmt.Errorf("address %q: a tls:// address needs the host its certificate names", s)
	}
	return a, nil
}

// Host returns the host of the address, without brackets: the name a TLS certificate
// is verified for.
func (a Addr) Host() string {
	host, _, _ := net.SplitHostPort(a.HostPort)
	return host
}

// String returns the address as written: host:port or tls://host:port.
func (a Addr) String() string {
	if a.TLS {
		return tlsScheme + a.HostPort
	}
	return a.HostPort
}

// Dialer dials node addresses.
type Dialer struct {
	// Net dials the TCP connection; its Timeout bounds the TLS handshake too.
	Net net.Dialer
	// TLS configures the TLS addresses: RootCAs (nil: the system roots), Certificates (the
	// client certificate, if any). Its ServerName is ignored: every address is verified for
	// its own host. Nil: the system roots and no client certificate.
	TLS *tls.Config
}

// Dial connects to a; for a TLS address it also completes the handshake, verifying the
// node's certificate for a.Host(). ctx bounds both.
func (d *Dialer) Dial(ctx context.Context, a Addr) (net.Conn, error) {
	if !a.TLS {
		return d.Net.DialContext(ctx, "tcp", a.HostPort)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.TLS != nil {
		cfg = d.TLS.Clone()
	}
	cfg.ServerName = a.Host()
	td := tls.Dialer{NetDialer: &d.Net, Config: cfg}
	return td.DialContext(ctx, "tcp", a.HostPort)
}

// LoadCertPool returns a pool of the PEM certificates in file. A file without any is an
// error.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in " + file)
	}
	return pool, nil
}
