package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

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
		{name: "empty env data dir", env: map[string]string{"RATCHET_DATA_DIR": ""}, check: func(c Config) bool { return c.DataDir == "" }},
		{name: "empty env string", env: map[string]string{"RATCHET_REQUIREPASS": "", "RATCHET_METRICS_LISTEN": ""},
			check: func(c Config) bool { return c.RequirePass == "" && c.MetricsListen == "" }},
		{name: "unset env keeps default", env: map[string]string{}, check: func(c Config) bool { return c.DataDir == "./ratchet-data" }},
		{name: "empty env number", env: map[string]string{"RATCHET_MAX_CLIENTS": ""}, err: "RATCHET_MAX_CLIENTS"},
		{name: "connection defaults", check: func(c Config) bool {
			return c.ReadTimeout == 10*time.Second && c.IdleTimeout == 0 && c.HandshakeTimeout == 5*time.Second && c.MaxQueryBuffer == 64<<20
		}},
		{name: "connection flags", args: []string{"--read-timeout", "2s", "--timeout", "300", "--tls-handshake-timeout", "250ms", "--max-query-buffer", "1GiB"},
			check: func(c Config) bool {
				return c.ReadTimeout == 2*time.Second && c.IdleTimeout == 300*time.Second && c.HandshakeTimeout == 250*time.Millisecond && c.MaxQueryBuffer == 1<<30
			}},
		{name: "timeout duration", args: []string{"--timeout", "1m30s"}, check: func(c Config) bool { return c.IdleTimeout == 90*time.Second }},
		{name: "timeout from env", env: map[string]string{"RATCHET_TIMEOUT": "0"}, check: func(c Config) bool { return c.IdleTimeout == 0 }},
		{name: "read timeout off", args: []string{"--read-timeout", "0"}, check: func(c Config) bool { return c.ReadTimeout == 0 }},
		{name: "bad timeout", args: []string{"--timeout", "-5"}, err: "invalid timeout"},
		{name: "bad timeout word", args: []string{"--timeout", "soon"}, err: "invalid timeout"},
		{name: "bad read timeout", args: []string{"--read-timeout", "-1s"}, err: "--read-timeout"},
		{name: "bad handshake timeout", args: []string{"--tls-handshake-timeout", "0s"}, err: "--tls-handshake-timeout"},
		{name: "bad query buffer", args: []string{"--max-query-buffer", "0"}, err: "invalid size"},
		{name: "version", args: []string{"--version"}, err: errVersion.Error()},
		{name: "version not from env", env: map[string]string{"RATCHET_VERSION": "1"}, check: func(c Config) bool { return c.Role == "origin" }},
		{name: "help", args: []string{"--help"}, err: "help requested"},
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
		{name: "cluster tls flags", args: []string{"--role", "edge", "--cluster-secret", "s", "--origin", "tls://127.0.0.1:1",
			"--cluster-ca", "ca.pem", "--cluster-cert", "n.pem", "--cluster-key", "n.key"},
			check: func(c Config) bool {
				return c.ClusterCA == "ca.pem" && c.ClusterCert == "n.pem" && c.ClusterKey == "n.key" && c.OriginList()[0] == "tls://127.0.0.1:1"
			}},
		{name: "cluster tls env", env: map[string]string{"RATCHET_CLUSTER_CA": "ca.pem", "RATCHET_CLUSTER_CERT": "n.pem", "RATCHET_CLUSTER_KEY": "n.key",
			"RATCHET_CLUSTER_CLIENT_CA": "clients.pem", "RATCHET_TLS_CERT": "s.pem", "RATCHET_TLS_KEY": "s.key"},
			check: func(c Config) bool {
				return c.ClusterCA == "ca.pem" && c.ClusterCert == "n.pem" && c.ClusterKey == "n.key" && c.ClusterClientCA == "clients.pem"
			}},
		{name: "tls peer", args: []string{"--region", "us", "--peer", "eu=tls://[::1]:7002", "--cluster-secret", "s"},
			check: func(c Config) bool { p, _ := c.PeerList(); return len(p) == 1 && p[0].Addr == "tls://[::1]:7002" }},
		{name: "cluster cert half", args: []string{"--cluster-cert", "n.pem"}, err: "--cluster-cert and --cluster-key go together"},
		{name: "cluster key half", env: map[string]string{"RATCHET_CLUSTER_KEY": "n.key"}, err: "--cluster-cert and --cluster-key go together"},
		{name: "client CA without TLS", args: []string{"--cluster-client-ca", "ca.pem"}, err: "--cluster-client-ca needs --tls-cert"},
		{name: "origin other scheme", args: []string{"--role", "edge", "--cluster-secret", "s", "--origin", "rediss://127.0.0.1:1"}, err: "--origin: address"},
		{name: "origin tls without port", args: []string{"--role", "edge", "--cluster-secret", "s", "--origin", "127.0.0.1:1,tls://127.0.0.1"}, err: "--origin: address"},
		{name: "peer bad port", args: []string{"--peer", "eu=tls://127.0.0.1:99999", "--cluster-secret", "s"}, err: `--peer "eu=tls://127.0.0.1:99999"`},
		{name: "stray arg", args: []string{"extra"}, err: "unexpected argument"},

		// Values that cannot be meant are refused, naming the flag or the variable.
		{name: "empty env listen", env: map[string]string{"RATCHET_LISTEN": ""}, err: "RATCHET_LISTEN is empty: want HOST:PORT"},
		{name: "empty listen", args: []string{"--listen", ""}, err: "--listen is empty: want HOST:PORT"},
		{name: "flag listen beats empty env", args: []string{"--listen", "127.0.0.1:7001"}, env: map[string]string{"RATCHET_LISTEN": ""},
			check: func(c Config) bool { return c.Listen == "127.0.0.1:7001" }},
		{name: "empty flag listen beats env", args: []string{"--listen="}, env: map[string]string{"RATCHET_LISTEN": "127.0.0.1:7001"}, err: "--listen is empty"},
		{name: "listen without port", args: []string{"--listen", "6380"}, err: `--listen "6380": want HOST:PORT`},
		{name: "listen named port", args: []string{"--listen", "127.0.0.1:redis"}, err: "the port must be a number"},
		{name: "listen port too big", env: map[string]string{"RATCHET_LISTEN": "127.0.0.1:65536"}, err: `RATCHET_LISTEN "127.0.0.1:65536": the port must be`},
		{name: "listen every interface", args: []string{"--listen", ":6390"}, check: func(c Config) bool { return c.Listen == ":6390" }},
		{name: "bad metrics listen", args: []string{"--metrics-listen", "localhost"}, err: `--metrics-listen "localhost": want HOST:PORT, e.g. 127.0.0.1:6380, or empty to disable it`},
		{name: "bad pprof listen", env: map[string]string{"RATCHET_PPROF_LISTEN": "x"}, err: `RATCHET_PPROF_LISTEN "x"`},
		{name: "empty region", args: []string{"--region", ""}, err: "--region is empty"},
		{name: "blank env region", env: map[string]string{"RATCHET_REGION": " "}, err: "RATCHET_REGION is empty"},
		{name: "empty node id", args: []string{"--node-id="}, err: "--node-id is empty"},
		{name: "empty env node id", env: map[string]string{"RATCHET_NODE_ID": ""}, err: "RATCHET_NODE_ID is empty"},
		{name: "spaced node id", args: []string{"--node-id", " a"}, err: `--node-id " a": want a name without`},
		{name: "node id", args: []string{"--node-id", "a1"}, check: func(c Config) bool { return c.NodeID == "a1" }},
		{name: "log level verbose", args: []string{"--log-level", "verbose"}, err: `--log-level "verbose": want debug, info, warn or error`},
		{name: "empty env log level", env: map[string]string{"RATCHET_LOG_LEVEL": ""}, err: `RATCHET_LOG_LEVEL "": want debug`},
		{name: "log level offset", args: []string{"--log-level", "info+2"}, err: "--log-level"},
		{name: "log level case", args: []string{"--log-level", "WARN"}, check: func(c Config) bool { return c.LogLevel == "WARN" }},
		{name: "log format yaml", args: []string{"--log-format", "yaml"}, err: `--log-format "yaml": want text or json`},
		{name: "empty env log format", env: map[string]string{"RATCHET_LOG_FORMAT": ""}, err: `RATCHET_LOG_FORMAT "": want text or json`},
		{name: "log format case", args: []string{"--log-format", "JSON"}, check: func(c Config) bool { return c.LogFormat == "JSON" }},
		{name: "zero publish interval", args: []string{"--publish-interval", "0s"}, err: "--publish-interval 0s: want a positive duration"},
		{name: "NaN threshold", args: []string{"--publish-threshold", "NaN"}, err: "--publish-threshold NaN"},
		{name: "NaN env share", env: map[string]string{"RATCHET_DEGRADED_SHARE": "nan"}, err: "RATCHET_DEGRADED_SHARE NaN"},
		{name: "empty duration", args: []string{"--freshness="}, err: "-freshness"},
		{name: "empty env duration", env: map[string]string{"RATCHET_SNAPSHOT_INTERVAL": ""}, err: "RATCHET_SNAPSHOT_INTERVAL"},
		{name: "empty env size", env: map[string]string{"RATCHET_MAX_MEMORY": ""}, err: "RATCHET_MAX_MEMORY is empty: want a value"},
		{name: "empty env float", env: map[string]string{"RATCHET_DEGRADED_SHARE": ""}, err: "RATCHET_DEGRADED_SHARE"},
		{name: "empty timeout", args: []string{"--timeout="}, err: "invalid timeout"},
		{name: "bad env value named", env: map[string]string{"RATCHET_THREADS": "two"}, err: `RATCHET_THREADS "two"`},
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

// emptyAccepted are the flags whose empty value means something (--help says what).
var emptyAccepted = map[string]bool{"data-dir": true, "metrics-listen": true, "pprof-listen": true,
	"requirepass": true, "cluster-secret": true, "tls-cert": true, "tls-key": true, "origin": true, "peer": true,
	"cluster-ca": true, "cluster-cert": true, "cluster-key": true, "cluster-client-ca": true, "aclfile": true}

// TestEmptyValues: every flag refuses the empty value, as --name= and as RATCHET_NAME=,
// with an error naming it, except those of emptyAccepted, which --help lists. A new flag
// must be added to one list or the other.
func TestEmptyValues(t *testing.T) {
	c := DefaultConfig()
	var x, y bool
	var help strings.Builder
	usage(&help)
	newFlagSet(&c, &x, &y).VisitAll(func(f *flag.Flag) {
		if f.Name == "version" {
			return
		}
		for _, tc := range []struct {
			args   []string
			env    map[string]string
			naming string
		}{
			{args: []string{"--" + f.Name + "="}, naming: "-" + f.Name},
			{env: map[string]string{envName(f.Name): ""}, naming: envName(f.Name)},
		} {
			_, err := parseConfig(tc.args, env(tc.env))
			switch {
			case emptyAccepted[f.Name] && err != nil:
				t.Errorf("%v %v: %v, want the empty value accepted", tc.args, tc.env, err)
			case !emptyAccepted[f.Name] && (err == nil || !strings.Contains(err.Error(), tc.naming)):
				t.Errorf("%v %v: err %v, want it refused naming %s", tc.args, tc.env, err, tc.naming)
			}
		}
		if header, _, _ := strings.Cut(help.String(), "\n  --"); emptyAccepted[f.Name] && !strings.Contains(header, "--"+f.Name) {
			t.Errorf("--help does not say what an empty --%s means", f.Name)
		}
	})
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{256 << 20: "256MiB", 1 << 30: "1GiB", 64 << 20: "64MiB", 3072: "3KiB", 1536: "1536B", 1000: "1000B", 100e6: "100000000B"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

// TestUsage: --help names every flag and its RATCHET_* variable, and writes sizes in
// binary units.
func TestUsage(t *testing.T) {
	var b strings.Builder
	usage(&b)
	out := b.String()
	c := DefaultConfig()
	var x, y bool
	newFlagSet(&c, &x, &y).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out, "--"+f.Name+" ") && !strings.Contains(out, "--"+f.Name+"\n") {
			t.Errorf("usage lacks --%s", f.Name)
		}
		if f.Name != "version" && !strings.Contains(out, "("+envName(f.Name)+")") {
			t.Errorf("usage lacks %s", envName(f.Name))
		}
	})
	for _, want := range []string{"(default 256MiB)", "(default 64MiB)", "RATCHET_DATA_DIR", "(default 10s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	if strings.Contains(out, "268435456") || strings.Contains(out, "RATCHET_VERSION") {
		t.Errorf("usage has a raw size or RATCHET_VERSION:\n%s", out)
	}
}

func TestVersionLine(t *testing.T) {
	old := revision
	defer func() { revision = old }()
	revision = "abc123"
	if got := versionLine(); !strings.HasPrefix(got, "ratchet "+version+" (revision abc123, go") {
		t.Errorf("versionLine = %q", got)
	}
	revision = ""
	if got := buildRevision(); got == "" {
		t.Error("buildRevision is empty")
	}
}

func TestRedisSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 300 * time.Second: "300", 1500 * time.Millisecond: "2"} {
		if got := redisSeconds(d); got != want {
			t.Errorf("redisSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}
