package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/link"
	"github.com/ratchet/ratchet/replication"
)

// Config is every flag of the ratchet binary (SPEC section 4). DefaultConfig gives the
// defaults; each flag can also come from RATCHET_<NAME> (upper case, '-' as '_'; a set but
// empty variable is the empty value, as --name= is); a flag on the command line wins over
// the environment.
type Config struct {
	Listen        string
	Role          string
	Region        string
	NodeID        string
	Origins       string
	Peers         []string
	DataDir       string
	MetricsListen string
	RequirePass   string
	ClusterSecret string
	TLSCert       string
	TLSKey        string
	MaxClients    int
	MaxMemory     int64

	Freshness        time.Duration
	ReplayInterval   time.Duration
	PublishThreshold float64
	PublishInterval  time.Duration
	SnapshotInterval time.Duration
	LoadWait         time.Duration // origin: how long from start the snapshot may load before the listener opens
	DegradedShare    float64
	ColdShare        float64

	OriginTimeout time.Duration

	WriteTimeout     time.Duration
	ReadTimeout      time.Duration // an incomplete request making no progress this long closes its connection; 0: never
	IdleTimeout      time.Duration // Redis's timeout: a client idle this long is closed; 0: never
	HandshakeTimeout time.Duration // bound on a TLS handshake
	MaxQueryBuffer   int64         // bound on request bytes buffered across all connections
	Threads          int           // GOMAXPROCS; 0 leaves Go's default (one per core)
	EventLoops       int           // epoll loops serving plain TCP (Linux); 0: one per thread; -1: none
	PprofListen      string        // net/http/pprof address; empty disables
	LogLevel         string
	LogFormat        string

	ClusterCA       string // PEM roots of tls:// --origin/--peer certificates; empty: the system roots
	ClusterCert     string // client certificate of tls:// node links
	ClusterKey      string
	ClusterClientCA string // PEM roots client certificates of nodes are verified against (mutual TLS)
	ACLFile         string // users in Redis's ACL syntax; empty: the default user only

	BusyReplyThreshold time.Duration // a script running this long makes other clients' commands answer BUSY

	PubsubOutputLimit pushLimit // Redis's client-output-buffer-limit pubsub (pushflags.go)
	TrackingMaxKeys   int       // Redis's tracking-table-max-keys
}

// DefaultConfig returns the embedded defaults: a standalone origin on 127.0.0.1:6380.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:6380",
		Role:             "origin",
		Region:           "local",
		DataDir:          "./ratchet-data",
		MetricsListen:    "127.0.0.1:9380",
		MaxClients:       10000,
		MaxMemory:        256 << 20,
		Freshness:        time.Second,
		ReplayInterval:   5 * time.Millisecond,
		PublishThreshold: 0.2,
		PublishInterval:  time.Second,
		SnapshotInterval: time.Second,
		LoadWait:         850 * time.Millisecond,
		DegradedShare:    1.0,
		ColdShare:        0.001,
		OriginTimeout:    100 * time.Millisecond,
		WriteTimeout:     10 * time.Second,
		ReadTimeout:      10 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		MaxQueryBuffer:   64 << 20,
		LogLevel:         "info",
		LogFormat:        "text",

		BusyReplyThreshold: 5 * time.Second,

		PubsubOutputLimit: defaultPushLimit,
		TrackingMaxKeys:   1_000_000,
	}
}

// listFlag collects a repeatable, comma-separated flag. Values set before fresh is
// raised (from the environment) are replaced by the first value set after it (the
// command line), so the command line wins as for every other flag.
type listFlag struct {
	v     *[]string
	fresh *bool
}

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	if l.fresh != nil && *l.fresh {
		*l.v, *l.fresh = nil, false
	}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.v = append(*l.v, p)
		}
	}
	return nil
}

// sizeFlag parses byte sizes: 1048576, 512KiB, 256MiB, 1GiB, 100MB.
type sizeFlag struct{ v *int64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return formatSize(*s.v)
}

// formatSize writes n in the largest binary unit that divides it: 256MiB, 1GiB, 1000B.
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// secondsFlag parses Redis's timeout: a bare integer is seconds (300), and a Go duration
// (5m, 1m30s) is accepted too. 0 means never.
type secondsFlag struct{ v *time.Duration }

func (d secondsFlag) String() string {
	if d.v == nil {
		return ""
	}
	return d.v.String()
}

func (d secondsFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(time.Duration(1<<62)/time.Second) {
			return fmt.Errorf("invalid timeout %q (want seconds from 0, or a duration such as 5m)", v)
		}
		*d.v = time.Duration(n) * time.Second
		return nil
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 0 {
		return fmt.Errorf("invalid timeout %q (want seconds, e.g. 300, or a duration such as 5m)", v)
	}
	*d.v = dur
	return nil
}

func (s sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

func parseSize(v string) (int64, error) {
	n, err := scaled(strings.TrimSpace(v), sizeUnits, 1<<62)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 268435456, 256MiB, 1GiB)", v)
	}
	return n, nil
}

// sizeUnits are --max-memory's units: SI (kb = 1000) and binary (kib = 1024).
var sizeUnits = []sizeUnit{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"b", 1}}

// sizeUnit is a suffix of a size and what it multiplies by.
type sizeUnit struct {
	suffix string
	mult   int64
}

// scaled reads a non-negative integer followed by at most one of units (case-insensitive,
// the first matching suffix wins), refusing results above limit.
func scaled(v string, units []sizeUnit, limit int64) (int64, error) {
	lower, mult := strings.ToLower(v), int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, mult = strings.TrimSuffix(lower, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(lower), 10, 64)
	if err != nil || n < 0 || n > limit/mult {
		return 0, fmt.Errorf("invalid size %q", v)
	}
	return n * mult, nil
}

// Errors parseConfig returns for the flags that ask for something other than a run.
var (
	errHelp    = flag.ErrHelp
	errVersion = errors.New("version requested")
)

// noEnv are the flags that never come from the environment: a RATCHET_VERSION left set
// must not turn every start into a version print.
var noEnv = map[string]bool{"version": true}

// envName is the environment variable of flag name: RATCHET_<NAME>, '-' as '_'.
func envName(name string) string {
	return "RATCHET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet binds every flag to c. cliPeers is raised before the command line is parsed
// so that --peer there replaces RATCHET_PEER; showVersion is --version.
func newFlagSet(c *Config, cliPeers, showVersion *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("ratchet", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // main reports errors and prints usage itself
	fs.StringVar(&c.Listen, "listen", c.Listen, "RESP address")
	fs.StringVar(&c.Role, "role", c.Role, "origin or edge")
	fs.StringVar(&c.Region, "region", c.Region, "this region's name")
	fs.StringVar(&c.NodeID, "node-id", c.NodeID, "unique in the region (default: derived from host and port)")
	fs.StringVar(&c.Origins, "origin", c.Origins, "edge: origin addresses, comma separated")
	fs.Var(listFlag{&c.Peers, cliPeers}, "peer", "origin: REGION=ADDR, repeatable or comma separated")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "origin: snapshot directory; empty disables snapshots")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "Prometheus /metrics, /healthz and /readyz address; empty disables")
	fs.StringVar(&c.RequirePass, "requirepass", c.RequirePass, "password clients must AUTH with")
	fs.StringVar(&c.ClusterSecret, "cluster-secret", c.ClusterSecret, "password of node-to-node traffic")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "TLS certificate (PEM) for the RESP listener")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "TLS key (PEM) for the RESP listener")
	fs.IntVar(&c.MaxClients, "max-clients", c.MaxClients, "connections beyond this are refused")
	fs.Var(sizeFlag{&c.MaxMemory}, "max-memory", "bound on the memory of counts (B, KiB, MiB, GiB, KB, MB, GB)")
	fs.Var(sizeFlag{&c.MaxQueryBuffer}, "max-query-buffer", "bound on request bytes buffered across all connections; past it the connection holding the most is closed")
	fs.DurationVar(&c.Freshness, "freshness", c.Freshness, "edge: how long a local entry stays fresh")
	fs.DurationVar(&c.ReplayInterval, "replay-interval", c.ReplayInterval, "edge: replay flush interval")
	fs.Float64Var(&c.PublishThreshold, "publish-threshold", c.PublishThreshold, "origin: share of the limit before a cell is published")
	fs.DurationVar(&c.PublishInterval, "publish-interval", c.PublishInterval, "origin: publication interval")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "origin: snapshot interval")
	fs.DurationVar(&c.LoadWait, "load-wait", c.LoadWait, "origin: on a restart, load the snapshot on every thread until this long after start before listening; the rest loads in the background while it serves (0: listen at once)")
	fs.Float64Var(&c.DegradedShare, "degraded-share", c.DegradedShare, "edge: share of the limit enforced while the origin is unreachable")
	fs.Float64Var(&c.ColdShare, "cold-share", c.ColdShare, "origin: share of a limit each edge may admit on a tuple it holds no lease for, without asking (0: none)")
	fs.DurationVar(&c.OriginTimeout, "origin-timeout", c.OriginTimeout, "edge: bound on one origin call (read, replay, decide, forward), or four smoothed round trips of its answered calls when longer (at most 2s)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "drop a client that does not read its replies for this long")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "close a connection whose incomplete request makes no progress for this long; 0: never")
	fs.Var(secondsFlag{&c.IdleTimeout}, "timeout", "close a client idle this long (Redis's timeout: seconds, or a duration); 0: never")
	fs.DurationVar(&c.HandshakeTimeout, "tls-handshake-timeout", c.HandshakeTimeout, "bound on a TLS handshake")
	fs.IntVar(&c.Threads, "threads", c.Threads, "threads running Go code at once (GOMAXPROCS); 0: one per core")
	fs.IntVar(&c.EventLoops, "event-loops", c.EventLoops, "epoll event loops serving plain TCP clients (Linux); 0: one per thread (--threads); -1: a goroutine per connection instead")
	fs.StringVar(&c.PprofListen, "pprof-listen", c.PprofListen, "address of net/http/pprof, for profiling; empty disables")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.StringVar(&c.ClusterCA, "cluster-ca", c.ClusterCA, "CA certificates (PEM) tls:// --origin and --peer addresses are verified against; empty: the system roots")
	fs.StringVar(&c.ClusterCert, "cluster-cert", c.ClusterCert, "client certificate (PEM) presented on tls:// --origin and --peer links")
	fs.StringVar(&c.ClusterKey, "cluster-key", c.ClusterKey, "key (PEM) of --cluster-cert")
	fs.StringVar(&c.ClusterClientCA, "cluster-client-ca", c.ClusterClientCA, "CA certificates (PEM) of node client certificates: with --tls-cert, RL.INTERNAL.HELLO needs one (mutual TLS)")
	fs.StringVar(&c.ACLFile, "aclfile", c.ACLFile, "file of users in Redis's ACL syntax (user NAME on >password ~pattern +@category); --requirepass stays the default user's password")
	fs.DurationVar(&c.BusyReplyThreshold, "busy-reply-threshold", c.BusyReplyThreshold, "a script running this long makes other clients' commands answer BUSY and may be stopped with SCRIPT KILL (Redis's busy-reply-threshold, lua-time-limit)")
	fs.Var(&c.PubsubOutputLimit, "pubsub-output-limit", "\"hard soft seconds\": close a client whose pub/sub messages and invalidations wait unread past hard bytes, or past soft for seconds (Redis's client-output-buffer-limit pubsub; 32mb is 32 MiB)")
	fs.IntVar(&c.TrackingMaxKeys, "tracking-table-max-keys", c.TrackingMaxKeys, "keys CLIENT TRACKING remembers at most; past it one is forgotten and invalidated (Redis's tracking-table-max-keys)")
	fs.BoolVar(showVersion, "version", false, "print the version and exit")
	return fs
}

// parseConfig reads flags from args, after defaults and the environment (lookupEnv, as
// os.LookupEnv). It returns errHelp for --help and errVersion for --version.
func parseConfig(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	c := DefaultConfig()
	var cliPeers, showVersion bool
	fs := newFlagSet(&c, &cliPeers, &showVersion)

	// The environment first, so that the command line overrides it. A variable that is
	// set but empty is the empty value: RATCHET_DATA_DIR= disables snapshots as
	// --data-dir= does.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if noEnv[f.Name] {
			return
		}
		name := envName(f.Name)
		if v, ok := lookupEnv(name); ok {
			if err := fs.Set(f.Name, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s %q: %w", name, v, err)
				if v == "" {
					envErr = fmt.Errorf("%s is empty: want a value, or leave it unset for the default (%w)", name, err)
				}
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	cliPeers = true
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if showVersion {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkValues(&c, args, lookupEnv); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// usage writes --help: every flag with its value's kind, its default (sizes as 256MiB)
// and its environment variable.
func usage(w io.Writer) {
	c := DefaultConfig()
	var cliPeers, showVersion bool
	fs := newFlagSet(&c, &cliPeers, &showVersion)
	fmt.Fprint(w, `Usage: ratchet [flags]

Ratchet is a rate-limit server that speaks the Redis protocol (see README.md).
Every flag can also be set by the environment variable shown beside it; a flag on the
command line wins over the environment, and a variable set to "" is the empty value.
An empty value is refused, except where it means something: --data-dir, --metrics-listen
and --pprof-listen (disabled), --requirepass and --cluster-secret (none), --tls-cert and
--tls-key (no TLS), --cluster-ca (the system roots), --cluster-cert and --cluster-key (no
client certificate), --cluster-client-ca (none required), --aclfile (the default user only), --origin (an
origin has none) and --peer (no peers). --node-id left unset is derived from the host and port.

`)
	fs.VisitAll(func(f *flag.Flag) {
		kind, help := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case sizeFlag:
			kind = "size"
		case secondsFlag:
			kind = "seconds|duration"
		}
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		if !noEnv[f.Name] {
			line += "   (" + envName(f.Name) + ")"
		}
		fmt.Fprintln(w, line)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			help += " (default " + f.DefValue + ")"
		}
		fmt.Fprintln(w, "        "+help)
	})
}

// Validate reports the first setting that cannot work, or one this build cannot serve yet.
func (c *Config) Validate() error {
	switch {
	case c.Role != "origin" && c.Role != "edge":
		return fmt.Errorf("--role must be origin or edge, not %q", c.Role)
	case c.Role == "edge" && len(c.OriginList()) == 0:
		return errors.New("--role edge needs --origin ADDR[,ADDR...]")
	case c.Role == "edge" && c.ClusterSecret == "":
		return errors.New("--role edge needs --cluster-secret (the origins' internal commands require it)")
	case c.Role == "origin" && c.Origins != "":
		return errors.New("--origin is for edges; an origin serves itself")
	case c.Freshness <= 0 || c.ReplayInterval <= 0 || c.OriginTimeout <= 0:
		return errors.New("--freshness, --replay-interval and --origin-timeout must be positive")
	case len(c.Peers) > 0 && c.Role != "origin":
		return errors.New("--peer is for origins: edges reach other regions through their origin")
	case len(c.Peers) > 0 && c.ClusterSecret == "":
		return errors.New("--peer needs --cluster-secret (peers authenticate with it)")
	case c.MaxClients < 1:
		return errors.New("--max-clients must be at least 1")
	case c.EventLoops < -1:
		return errors.New("--event-loops must be -1 (none), 0 (one per thread) or more")
	case c.Threads < 0:
		return errors.New("--threads must be 0 (one per core) or more")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case (c.ClusterCert == "") != (c.ClusterKey == ""):
		return errors.New("--cluster-cert and --cluster-key go together")
	case c.ClusterClientCA != "" && c.TLSCert == "":
		return errors.New("--cluster-client-ca needs --tls-cert (client certificates are checked in the TLS handshake)")
	case c.BusyReplyThreshold <= 0:
		return errors.New("--busy-reply-threshold must be positive")
	case c.TrackingMaxKeys < 1 || c.TrackingMaxKeys > 100_000_000:
		return errors.New("--tracking-table-max-keys must be from 1 to 100000000")
	case c.SnapshotInterval <= 0:
		return errors.New("--snapshot-interval must be positive")
	case c.LoadWait < 0:
		return errors.New("--load-wait must be 0 (listen at once) or positive")
	case c.WriteTimeout <= 0:
		return errors.New("--write-timeout must be positive")
	case c.ReadTimeout < 0:
		return errors.New("--read-timeout must be 0 (never) or positive")
	case c.HandshakeTimeout <= 0:
		return errors.New("--tls-handshake-timeout must be positive")
	case c.PublishThreshold < 0 || c.PublishThreshold > 1:
		return errors.New("--publish-threshold must be from 0 to 1")
	case c.DegradedShare < 0 || c.DegradedShare > 1:
		return errors.New("--degraded-share must be from 0 to 1")
	case c.ColdShare < 0 || c.ColdShare > engine.MaxColdShare:
		return fmt.Errorf("--cold-share must be from 0 to %g", engine.MaxColdShare)
	}
	if _, err := c.PeerList(); err != nil {
		return err
	}
	for _, a := range c.OriginList() {
		if _, err := link.ParseAddr(a); err != nil {
			return fmt.Errorf("--origin: %w", err)
		}
	}
	if c.NodeID == "" {
		host, _ := os.Hostname()
		c.NodeID = host + ":" + portOf(c.Listen)
	}
	return nil
}

// PeerList parses --peer REGION=ADDR values.
func (c *Config) PeerList() ([]replication.Peer, error) {
	var out []replication.Peer
	for _, p := range c.Peers {
		region, addr, ok := strings.Cut(p, "=")
		if !ok || region == "" || addr == "" {
			return nil, fmt.Errorf("--peer %q: want REGION=ADDR", p)
		}
		if region == c.Region {
			return nil, fmt.Errorf("--peer %q: that is this node's own region", p)
		}
		if _, err := link.ParseAddr(addr); err != nil {
			return nil, fmt.Errorf("--peer %q: %w", p, err)
		}
		out = append(out, replication.Peer{Region: region, Addr: addr})
	}
	return out, nil
}

// OriginList returns the --origin addresses.
func (c *Config) OriginList() []string {
	var out []string
	for _, a := range strings.Split(c.Origins, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}
