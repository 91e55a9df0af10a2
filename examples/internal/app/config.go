// Package app holds what the example apps share, so that each app's main.go
// shows only its framework's wiring: the flags and their environment
// fallbacks, the store (an embedded miniredis, a Redis server, a Redis
// Cluster or a master found through Redis Sentinel), the Limiter, the rules, the Prometheus metrics of -metrics
// (served by each app at [MetricsPath]), the start-up log and a graceful
// shutdown.
//
// Every app names its rules alike ([DefaultRule], [StrictRule]) and keys
// them alike, so a fleet mixing the four apps behind one Redis shares one
// limit.
package app

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Defaults of the flags, as the example apps contract sets them.
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultLimit       = 10
	DefaultStrictLimit = 2
	DefaultPeriod      = time.Minute
	DefaultLoginLimit  = 3
	// DefaultLoginPassword is the password POST /login accepts unless
	// LOGIN_PASSWORD says otherwise.
	DefaultLoginPassword = "open-sesame"
	// DefaultSentinelMaster is the master name of -sentinel-master.
	DefaultSentinelMaster = "mymaster"
)

// Key modes: what the rules limit.
const (
	// KeyIP limits each client IP address; forwarding headers count only
	// from -trusted-proxies.
	KeyIP = "ip"
	// KeyAPIKey limits each API key, read from X-API-Key and hashed; a
	// request without one is limited by its IP.
	KeyAPIKey = "apikey"
	// KeyJWT limits each user of a verified HS256 bearer token; a request
	// without a valid token is limited by its IP.
	KeyJWT = "jwt"
)

// Config is an example app's configuration.
type Config struct {
	// Addr is the listen address; a port of 0 picks a free one.
	Addr string
	// RedisURL is the Redis server to use, as a redis://, rediss:// or
	// unix:// URL (a bare host:port means redis://host:port). Empty, with
	// no RedisCluster, means an embedded miniredis.
	RedisURL string
	// RedisCluster lists seed nodes of a Redis Cluster, as host:port.
	RedisCluster []string
	// RedisSentinel lists Redis Sentinels, as host:port, that tell where
	// the master named SentinelMaster is.
	RedisSentinel []string
	// SentinelMaster is the name of the master the Sentinels watch.
	SentinelMaster string
	// Limit is the default rule's rate per Period.
	Limit int
	// StrictLimit is the strict rule's rate per Period.
	StrictLimit int
	// Period is both rules' period.
	Period time.Duration
	// Algorithm enforces both rules.
	Algorithm core.Algorithm
	// KeyMode is KeyIP, KeyAPIKey or KeyJWT.
	KeyMode string
	// JWTSecret verifies HS256 tokens in KeyJWT mode.
	JWTSecret string
	// TrustedProxies are the proxies whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// Fail is what the limiter does when Redis cannot decide.
	Fail core.FailurePolicy
	// Metrics serves Prometheus metrics at /metrics ([MetricsPath]) on
	// Addr: the Limiter's decisions, store calls and breaker (package
	// promlimit), the Go runtime's and the process's.
	Metrics bool
	// ShowIdentities shows identities on the live page and in the denial
	// log as the key function makes them (-show-identities,
	// SHOW_IDENTITIES=1); else they are hashed.
	ShowIdentities bool
	// NoBatch sends each Redis call by itself ([redisstore.WithoutBatching],
	// -batch=false) instead of pipelining the calls of concurrent
	// requests, as [redisstore.New] does by default over one server
	// or a Sentinel master ([redisstore.WithBatching]).
	NoBatch bool
	// Lease serves hot keys from leases of their limits' units
	// ([leasestore.New], -lease): most of a hot key's requests then
	// cost no round trip, at the price of a bounded overshoot, up to the
	// lease size less one per replica. Off by default: without it every
	// limit is exact across replicas.
	Lease bool
	// Timeout is the deadline of each store call: the library's
	// [core.DefaultTimeout] unless -timeout raises it.
	Timeout time.Duration

	// OTel gives the Limiter an OpenTelemetry observer (package
	// otellimit) whose metrics are exported every OTelInterval, and once
	// more when the app stops, as JSON lines among the log lines.
	OTel bool
	// OTelInterval is how often -otel exports: [DefaultOTelInterval].
	OTelInterval time.Duration
	// Prefix starts every storage key: [core.DefaultPrefix] unless -prefix
	// sets a service's own.
	Prefix string
	// RulesFile, when set, holds the default and strict rules (and the
	// default rule's per-plan limits) in place of Limit, StrictLimit,
	// Period and Algorithm; SIGHUP rereads it.
	RulesFile string
	// LoginLimit is the login rule's rate per Period: failed logins per
	// client IP.
	LoginLimit int
	// LoginPassword is the password POST /login accepts (LOGIN_PASSWORD).
	LoginPassword string
	// AdminToken, when set (ADMIN_TOKEN), serves the admin routes to
	// requests that carry it as a bearer token.
	AdminToken string
}

// UsageError is a bad flag or environment value: the app prints it and
// exits with status 2.
type UsageError struct {
	Err     error
	printed bool // the flag package has printed it, with the usage
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// EnvVars lists each flag's environment variable, in the order of the
// example apps contract.
var EnvVars = []struct{ Flag, Env string }{
	{"addr", "ADDR"},
	{"redis", "REDIS_URL"},
	{"redis-cluster", "REDIS_CLUSTER_ADDRS"},
	{"redis-sentinel", "REDIS_SENTINEL_ADDRS"},
	{"sentinel-master", "REDIS_SENTINEL_MASTER"},
	{"limit", "LIMIT"},
	{"strict-limit", "STRICT_LIMIT"},
	{"period", "PERIOD"},
	{"algorithm", "ALGORITHM"},
	{"key", "KEY"},
	{"jwt-secret", "JWT_SECRET"},
	{"trusted-proxies", "TRUSTED_PROXIES"},
	{"fail", "FAIL"},
	{"metrics", "METRICS"},
	{"show-identities", "SHOW_IDENTITIES"},
	{"batch", "BATCH"},
	{"lease", "LEASE"},
	{"timeout", "TIMEOUT"},
	{"otel", "OTEL"},
	{"otel-interval", "OTEL_INTERVAL"},
	{"prefix", "PREFIX"},
	{"rules", "RULES_FILE"},
	{"login-limit", "LOGIN_LIMIT"},
}

// Environment variables with no flag: secrets, which a flag would show in
// the process list.
const (
	LoginPasswordEnv = "LOGIN_PASSWORD"
	AdminTokenEnv    = "ADMIN_TOKEN"
)

// Defaults are what an app changes of the contract's defaults and texts:
// a zero field keeps the contract's.
type Defaults struct {
	// Limit is the default of -limit: [DefaultLimit] when 0.
	Limit int
	// LimitUsage describes -limit in the usage text.
	LimitUsage string
	// KeyMode is the default of -key: [KeyIP] when empty.
	KeyMode string
	// Routes describes the app's routes at the top of the usage text.
	Routes string
	// Try returns the start-up log's "try it" message and its command
	// line for the app at base: [TryCommand]'s when nil.
	Try func(c Config, base string) (msg, cmd string)
}

// Parse reads the configuration of the app called name from args (without
// the program name), falling back to getenv for every flag not given: a flag
// beats its environment variable, which beats the default. An empty
// environment value counts as unset. Usage and flag syntax errors go to out.
//
// Parse returns [flag.ErrHelp] for -h, and a [*UsageError] for a bad value.
func Parse(name string, args []string, getenv func(string) string, out io.Writer) (Config, error) {
	return ParseWith(name, Defaults{}, args, getenv, out)
}

// ParseWith is [Parse] with the defaults of d.
func ParseWith(name string, d Defaults, args []string, getenv func(string) string, out io.Writer) (Config, error) {
	var (
		c                                                  Config
		redisCluster, redisSentinel, algorithm, trusted, f string
		batch                                              bool
	)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Addr, "addr", DefaultAddr, "listen `address` (host:port; port 0 picks a free one)")
	fs.StringVar(&c.RedisURL, "redis", "", "Redis `URL`, such as redis://localhost:6379/0 (default: an embedded miniredis)")
	fs.StringVar(&redisCluster, "redis-cluster", "", "Redis Cluster seed `nodes`, comma-separated host:port")
	fs.StringVar(&redisSentinel, "redis-sentinel", "", "Redis `Sentinels`, comma-separated host:port, that find the master of -sentinel-master")
	fs.StringVar(&c.SentinelMaster, "sentinel-master", DefaultSentinelMaster, "the `name` of the master the Sentinels watch")
	fs.IntVar(&c.Limit, "limit", cmp.Or(d.Limit, DefaultLimit), cmp.Or(d.LimitUsage, "requests per period and client, on every route but /healthz"))
	fs.IntVar(&c.StrictLimit, "strict-limit", DefaultStrictLimit, "requests per period and client on /strict, on top of -limit")
	fs.DurationVar(&c.Period, "period", DefaultPeriod, "the limits' period")
	fs.StringVar(&algorithm, "algorithm", "gcra", "`algorithm`: gcra, fixed, sliding-log or sliding-counter")
	fs.StringVar(&c.KeyMode, "key", cmp.Or(d.KeyMode, KeyIP), "what is limited: ip, apikey (X-API-Key) or jwt (Authorization: Bearer)")
	fs.StringVar(&c.JWTSecret, "jwt-secret", "", "HS256 `secret` that verifies tokens (-key jwt)")
	fs.StringVar(&trusted, "trusted-proxies", "", "`CIDRs` of proxies whose X-Forwarded-For is believed, comma-separated")
	fs.StringVar(&f, "fail", "local", "when Redis fails: local (count per replica), open (allow) or closed (deny with 503)")
	fs.BoolVar(&c.Metrics, "metrics", false, "serve Prometheus metrics at /metrics on -addr, never limited")
	fs.BoolVar(&c.ShowIdentities, "show-identities", false, "show identities on the live page ("+PagePath+") and in the denial log, not hashed")
	fs.BoolVar(&batch, "batch", true, "pipeline the Redis calls of concurrent requests, the library's default; -batch=false sends each by itself")
	fs.BoolVar(&c.Lease, "lease", false, "serve hot keys from leases of their limits' units: fewer round trips, an overshoot of up to the lease size less one per replica")
	fs.DurationVar(&c.Timeout, "timeout", core.DefaultTimeout, "the `deadline` of each Redis call, such as 50ms or 1s; past it the -fail policy decides")
	fs.BoolVar(&c.OTel, "otel", false, "export OpenTelemetry metrics as JSON lines on stderr, every -otel-interval and when stopping")
	fs.DurationVar(&c.OTelInterval, "otel-interval", DefaultOTelInterval, "the `interval` between two -otel exports")
	fs.StringVar(&c.Prefix, "prefix", core.DefaultPrefix, "the `prefix` of every storage key: a service's own keeps its limits apart from other services'")
	fs.StringVar(&c.RulesFile, "rules", "", "YAML or JSON `file` of the default and strict rules, instead of -limit, -strict-limit, -period and -algorithm; reread on SIGHUP")
	fs.IntVar(&c.LoginLimit, "login-limit", DefaultLoginLimit, "failed logins (401 answers of POST /login) per period and client IP")
	for _, e := range EnvVars {
		f := fs.Lookup(e.Flag)
		f.Usage += "; env " + e.Env
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s [flags]\n\n", name)
		if d.Routes != "" {
			fmt.Fprint(out, d.Routes)
		} else {
			fmt.Fprintf(out, "Serves GET / (limited by -limit), GET /strict (also by -strict-limit), GET /healthz\n")
			fmt.Fprintf(out, "POST /login (X-Password, checked against %s; only failures count, -login-limit),\n", LoginPasswordEnv)
			fmt.Fprintf(out, "and, with -metrics, GET /metrics (never limited).")
		}
		fmt.Fprintf(out, " With %s set, GET /admin/quota and\n", AdminTokenEnv)
		fmt.Fprintf(out, "POST /admin/reset (?rule=R&identity=I, Authorization: Bearer <token>). Each flag not\n")
		fmt.Fprintf(out, "given falls back to its environment variable.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		return Config{}, &UsageError{Err: err, printed: true}
	}
	if fs.NArg() > 0 {
		return Config{}, usagef("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, e := range EnvVars {
		if given[e.Flag] {
			continue
		}
		if v := getenv(e.Env); v != "" {
			if err := fs.Set(e.Flag, v); err != nil {
				return Config{}, usagef("%s=%q: %v", e.Env, v, err)
			}
		}
	}
	c.NoBatch = !batch

	// Validate, naming each setting by its flag and its variable.
	switch {
	case c.Limit < 1:
		return Config{}, usagef("-limit (LIMIT) is %d: want at least 1", c.Limit)
	case c.StrictLimit < 1:
		return Config{}, usagef("-strict-limit (STRICT_LIMIT) is %d: want at least 1", c.StrictLimit)
	case c.Period <= 0:
		return Config{}, usagef("-period (PERIOD) is %v: want a positive duration, such as 1m or 10s", c.Period)
	case c.Timeout <= 0:
		return Config{}, usagef("-timeout (TIMEOUT) is %v: want a positive duration, such as 50ms or 1s", c.Timeout)
	case c.SentinelMaster == "":
		return Config{}, usagef("-sentinel-master (REDIS_SENTINEL_MASTER) is empty: want the master's name")
	case c.OTelInterval <= 0:
		return Config{}, usagef("-otel-interval (OTEL_INTERVAL) is %v: want a positive duration, such as 10s", c.OTelInterval)
	case c.LoginLimit < 1:
		return Config{}, usagef("-login-limit (LOGIN_LIMIT) is %d: want at least 1", c.LoginLimit)
	}
	if err := storekey.ValidateName("prefix", c.Prefix, true); err != nil {
		return Config{}, usagef("-prefix (PREFIX) is %q: %v", c.Prefix, err)
	}
	c.LoginPassword = cmp.Or(getenv(LoginPasswordEnv), DefaultLoginPassword)
	c.AdminToken = getenv(AdminTokenEnv)
	var err error
	if c.Algorithm, err = core.ParseAlgorithm(algorithm); err != nil {
		return Config{}, usagef("-algorithm (ALGORITHM) is %q: want gcra, fixed, sliding-log or sliding-counter", algorithm)
	}
	def, strict := c.Limits()
	for _, l := range []struct {
		flag  string
		limit core.Limit
	}{{"-limit", def}, {"-strict-limit", strict}} {
		if err := l.limit.Validate(); err != nil {
			return Config{}, usagef("%s %d per -period %v: %v", l.flag, l.limit.Rate, c.Period, err)
		}
	}
	if c.Fail, err = core.ParseFailurePolicy(f); err != nil {
		return Config{}, usagef("-fail (FAIL) is %q: want local, open or closed", f)
	}
	switch c.KeyMode {
	case KeyIP, KeyAPIKey:
	case KeyJWT:
		if c.JWTSecret == "" {
			return Config{}, usagef("-key jwt needs -jwt-secret (JWT_SECRET), the HS256 secret that verifies tokens")
		}
	default:
		return Config{}, usagef("-key (KEY) is %q: want ip, apikey or jwt", c.KeyMode)
	}
	if c.TrustedProxies, err = keyfuncs.ParsePrefixes(trusted); err != nil {
		return Config{}, usagef("-trusted-proxies (TRUSTED_PROXIES) is %q: %v", trusted, err)
	}
	if _, err := keyfuncs.IP(keyfuncs.TrustedProxies(c.TrustedProxies...)); err != nil {
		return Config{}, usagef("-trusted-proxies (TRUSTED_PROXIES) is %q: %v", trusted, err)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return Config{}, usagef("-addr (ADDR) is %q: want host:port, such as 127.0.0.1:8080", c.Addr)
	}
	if c.RedisCluster, err = hostPorts(redisCluster, "-redis-cluster (REDIS_CLUSTER_ADDRS) node"); err != nil {
		return Config{}, err
	}
	if c.RedisSentinel, err = hostPorts(redisSentinel, "-redis-sentinel (REDIS_SENTINEL_ADDRS) Sentinel"); err != nil {
		return Config{}, err
	}
	if err := c.oneRedis(); err != nil {
		return Config{}, err
	}
	if c.RulesFile != "" {
		if _, _, err := c.RateRules(); err != nil {
			return Config{}, usagef("-rules (RULES_FILE): %v", err)
		}
	}
	return c, nil
}

// hostPorts splits list, comma-separated host:port addresses; a bad one is
// an error naming it after what.
func hostPorts(list, what string) ([]string, error) {
	var addrs []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, usagef("%s %q: want host:port", what, s)
		}
		addrs = append(addrs, s)
	}
	return addrs, nil
}

// oneRedis checks that at most one Redis is configured, and the URL of
// -redis.
func (c Config) oneRedis() error {
	var set []string
	for _, r := range []struct {
		name string
		set  bool
	}{
		{"-redis (REDIS_URL)", c.RedisURL != ""},
		{"-redis-cluster (REDIS_CLUSTER_ADDRS)", len(c.RedisCluster) > 0},
		{"-redis-sentinel (REDIS_SENTINEL_ADDRS)", len(c.RedisSentinel) > 0},
	} {
		if r.set {
			set = append(set, r.name)
		}
	}
	switch len(set) {
	case 0, 1:
	case 2:
		return usagef("%s are both set: choose one", strings.Join(set, " and "))
	default:
		return usagef("%s are all set: choose one", strings.Join(set, ", "))
	}
	if c.RedisURL != "" {
		if _, err := c.redisOptions(); err != nil {
			return usagef("-redis (REDIS_URL): %v", err)
		}
	}
	return nil
}

// redisOptions returns the options of the client for RedisURL.
func (c Config) redisOptions() (*redis.Options, error) {
	u := c.RedisURL
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redactURL(u), err)
	}
	return opts, nil
}

// redactURL returns u with any password replaced by "xxxxx".
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable URL)"
}

// Limits returns the default and strict rules' limits.
func (c Config) Limits() (def, strict core.Limit) {
	def = core.Limit{Rate: c.Limit, Period: c.Period, Burst: c.Limit, Algorithm: c.Algorithm}
	strict = core.Limit{Rate: c.StrictLimit, Period: c.Period, Burst: c.StrictLimit, Algorithm: c.Algorithm}
	return def, strict
}
