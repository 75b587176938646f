package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// checkValues refuses, before anything opens or listens, the values that cannot be meant:
// an empty or malformed --listen (empty would bind every interface on a random port), a
// malformed --metrics-listen or --pprof-listen, an empty --region, a --node-id set to the
// empty string, a --log-level or --log-format that is not one of theirs (they used to
// fall back to info and text silently), a --publish-interval that is not positive (it
// became 1s), and NaN shares. Each error names the flag, or the RATCHET_* variable the
// value came from. args and lookupEnv are parseConfig's. The string flags whose empty
// value means something are not checked for it: --data-dir, --metrics-listen and
// --pprof-listen (disabled), --requirepass, --cluster-secret, --tls-cert and --tls-key
// (none), --origin and --peer (none; Validate requires --origin of an edge).
func checkValues(c *Config, args []string, lookupEnv func(string) (string, bool)) error {
	cli := cliFlags(args)
	fromEnv := func(name string) bool {
		_, ok := lookupEnv(envName(name))
		return ok && !cli[name] && !noEnv[name]
	}
	// name is how the error calls the flag: as it was given.
	name := func(flag string) string {
		if fromEnv(flag) {
			return envName(flag)
		}
		return "--" + flag
	}
	if err := checkAddr(name("listen"), c.Listen, false); err != nil {
		return err
	}
	if err := checkAddr(name("metrics-listen"), c.MetricsListen, true); err != nil {
		return err
	}
	if err := checkAddr(name("pprof-listen"), c.PprofListen, true); err != nil {
		return err
	}
	switch {
	case c.Role != "origin" && c.Role != "edge":
		return fmt.Errorf("%s must be origin or edge, not %q", name("role"), c.Role)
	case strings.TrimSpace(c.Region) == "":
		return fmt.Errorf("%s is empty: want this region's name, e.g. us-east", name("region"))
	case c.NodeID == "" && (cli["node-id"] || fromEnv("node-id")):
		return fmt.Errorf("%s is empty: want a name unique in the region, or leave it unset to derive it from the host and port", name("node-id"))
	case strings.TrimSpace(c.NodeID) != c.NodeID:
		return fmt.Errorf("%s %q: want a name without leading or trailing spaces", name("node-id"), c.NodeID)
	}
	if _, ok := logLevels[strings.ToLower(c.LogLevel)]; !ok {
		return fmt.Errorf("%s %q: want debug, info, warn or error", name("log-level"), c.LogLevel)
	}
	if f := strings.ToLower(c.LogFormat); f != "text" && f != "json" {
		return fmt.Errorf("%s %q: want text or json", name("log-format"), c.LogFormat)
	}
	if c.PublishInterval <= 0 {
		return fmt.Errorf("%s %v: want a positive duration, e.g. 1s", name("publish-interval"), c.PublishInterval)
	}
	for flag, v := range map[string]float64{"publish-threshold": c.PublishThreshold, "degraded-share": c.DegradedShare, "cold-share": c.ColdShare} {
		if math.IsNaN(v) {
			return fmt.Errorf("%s NaN: want a share from 0 to 1", name(flag))
		}
	}
	return nil
}

// logLevels are the values of --log-level, matched without regard to case.
var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

// checkAddr refuses an address that is not HOST:PORT with a port from 0 to 65535 (HOST
// may be empty: every interface), and an empty one unless optional (empty disables).
func checkAddr(name, addr string, optional bool) error {
	if addr == "" {
		if optional {
			return nil
		}
		return fmt.Errorf("%s is empty: want HOST:PORT, e.g. 127.0.0.1:6380 (an empty address would listen on every interface at a random port)", name)
	}
	want := "want HOST:PORT, e.g. 127.0.0.1:6380"
	if optional {
		want += ", or empty to disable it"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %s", name, addr, want)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s %q: the port must be a number from 0 to 65535; %s", name, addr, want)
	}
	return nil
}

// cliFlags returns the names of the flags args sets. Its errors are parseConfig's to
// report.
func cliFlags(args []string) map[string]bool {
	c := DefaultConfig()
	var peers, version bool
	fs := newFlagSet(&c, &peers, &version)
	_ = fs.Parse(args)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
