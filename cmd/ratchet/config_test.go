package main

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(Config) bool
		err   string
	}{
		{name: "defaults", check: func(c Config) bool {
			return c.Listen == "127.0.0.1:6380" && c.Role == "origin" && c.MaxMemory == 256<<20 &&
				c.SnapshotInterval == time.Second && c.MaxClients == 10000 && strings.HasSuffix(c.NodeID, ":6380")
		}},
		{name: "env", env: map[string]string{"RATCHET_LISTEN": "127.0.0.1:7000", "RATCHET_MAX_MEMORY": "1GiB",
			"RATCHET_SNAPSHOT_INTERVAL": "250ms", "RATCHET_REQUIREPASS": "pw"},
			check: func(c Config) bool {
				return c.Listen == "127.0.0.1:7000" && c.MaxMemory == 1<<30 && c.SnapshotInterval == 250*time.Millisecond && c.RequirePass == "pw"
			}},
		{name: "flag beats env", args: []string{"--listen", "127.0.0.1:7001"}, env: map[string]string{"RATCHET_LISTEN": "127.0.0.1:7000"},
			check: func(c Config) bool { return c.Listen == "127.0.0.1:7001" }},
		{name: "peer flag beats env", args: []string{"--peer", "eu=127.0.0.1:2", "--peer", "ap=127.0.0.1:3"},
			env:   map[string]string{"RATCHET_PEER": "us=127.0.0.1:1", "RATCHET_CLUSTER_SECRET": "s", "RATCHET_REGION": "sa"},
			check: func(c Config) bool { return len(c.Peers) == 2 && c.Peers[0] == "eu=127.0.0.1:2" }},
		{name: "peer from env", env: map[string]string{"RATCHET_PEER": "us=127.0.0.1:1,eu=127.0.0.1:2", "RATCHET_CLUSTER_SECRET": "s"},
			check: func(c Config) bool { return len(c.Peers) == 2 }},
		{name: "sizes", args: []string{"--max-memory", "100MB"}, check: func(c Config) bool { return c.MaxMemory == 100e6 }},
		{name: "empty data dir", args: []string{"--data-dir", ""}, check: func(c Config) bool { return c.DataDir == "" }},
		{name: "bad size", args: []string{"--max-memory", "lots"}, err: "invalid size"},
		{name: "bad env", env: map[string]string{"RATCHET_MAX_CLIENTS": "many"}, err: "RATCHET_MAX_CLIENTS"},
		{name: "bad role", args: []string{"--role", "proxy"}, err: "--role must be"},
		{name: "edge without origin", args: []string{"--role", "edge"}, err: "needs --origin"},
		{name: "edge without secret", args: []string{"--role", "edge", "--origin", "127.0.0.1:1"}, err: "needs --cluster-secret"},
		{name: "edge", args: []string{"--role", "edge", "--origin", "127.0.0.1:1, 127.0.0.1:2", "--cluster-secret", "s"},
			check: func(c Config) bool { return len(c.OriginList()) == 2 && c.OriginList()[1] == "127.0.0.1:2" }},
		{name: "origin with origin", args: []string{"--origin", "127.0.0.1:1"}, err: "for edges"},
		{name: "peer without secret", args: []string{"--peer", "eu=127.0.0.1:1"}, err: "needs --cluster-secret"},
		{name: "peer malformed", args: []string{"--peer", "127.0.0.1:1", "--cluster-secret", "s"}, err: "want REGION=ADDR"},
		{name: "peer own region", args: []string{"--region", "eu", "--peer", "eu=127.0.0.1:1", "--cluster-secret", "s"}, err: "own region"},
		{name: "peers", args: []string{"--region", "us", "--peer", "eu=127.0.0.1:1,ap=127.0.0.1:2", "--peer", "sa=127.0.0.1:3", "--cluster-secret", "s"},
			check: func(c Config) bool {
				p, _ := c.PeerList()
				return len(p) == 3 && p[2].Region == "sa" && p[1].Addr == "127.0.0.1:2"
			}},
		{name: "tls half", args: []string{"--tls-cert", "c.pem"}, err: "go together"},
		{name: "stray arg", args: []string{"extra"}, err: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, env(tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
		})
	}
}
