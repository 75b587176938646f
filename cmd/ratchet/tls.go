package main

import (
	"crypto/tls"
	"fmt"

	"github.com/ratchet/ratchet/link"
)

// clusterTLS returns the TLS configuration of this node's tls:// links (--origin, --peer):
// the roots of --cluster-ca (none: the system roots) and the client certificate of
// --cluster-cert and --cluster-key. It is loaded whether or not an address is tls://, so a
// file that cannot be read stops the start, with the flag named, whatever the addresses.
func clusterTLS(cfg Config) (*tls.Config, error) {
	out := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.ClusterCA != "" {
		pool, err := link.LoadCertPool(cfg.ClusterCA)
		if err != nil {
			return nil, fmt.Errorf("--cluster-ca: %w", err)
		}
		out.RootCAs = pool
	}
	if cfg.ClusterCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.ClusterCert, cfg.ClusterKey)
		if err != nil {
			return nil, fmt.Errorf("--cluster-cert %s, --cluster-key %s: %w", cfg.ClusterCert, cfg.ClusterKey, err)
		}
		out.Certificates = []tls.Certificate{cert}
	}
	return out, nil
}

// listenerTLS returns the RESP listener's TLS configuration, nil without --tls-cert. With
// --cluster-client-ca it asks every client for a certificate and verifies one that is
// given against that CA, but lets clients without one in: Redis clients keep connecting
// with a password, and RL.INTERNAL.HELLO alone needs the certificate
// (commands.Options.ClusterClientCert).
func listenerTLS(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
	}
	out := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClusterClientCA != "" {
		pool, err := link.LoadCertPool(cfg.ClusterClientCA)
		if err != nil {
			return nil, fmt.Errorf("--cluster-client-ca: %w", err)
		}
		out.ClientCAs, out.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return out, nil
}
