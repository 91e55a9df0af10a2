package caddyratekit

import (
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("ratekit", parseCaddyfile)
	// before basic_auth, so that a client over its limit costs no
	// password check; the global order option moves it
	httpcaddyfile.RegisterDirectiveOrder("ratekit", httpcaddyfile.Before, "basic_auth")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	ratekit [<matcher>] {
//	    redis          <url>          # or redis_cluster <url>, redis_sentinel <url>
//	    prefix         <prefix>
//	    timeout        <duration>
//	    fail           local|open|closed
//	    fail_closed_status <status>
//	    replicas       <n>
//	    breaker [<failures> [<backoff> [<max_backoff>]]] {
//	        failures    <n>
//	        backoff     <duration>
//	        max_backoff <duration>
//	    }
//	    lease [<size>] {
//	        size <n>
//	        hold <duration>
//	    }
//	    denied_cache   <size>
//	    batching       on|off
//	    headers        both|legacy|ietf|none
//	    ietf_draft     <revision>
//	    no_identity    next|401
//
//	    rule <name> [<limit> <period>] {
//	        limit     <n>
//	        period    <duration>
//	        burst     <n>
//	        algorithm gcra|fixed|sliding-log|sliding-counter
//	        key ip [<ipv6_prefix>]
//	        key header <field>
//	        key apikey [<header>] {
//	            header      <field>
//	            query       <param>
//	            auth_scheme <scheme>
//	            hash_secret <secret>
//	        }
//	        key jwt {
//	            secret              <secret>
//	            public_key_file     <path>
//	            algorithms          <alg...>
//	            issuer              <iss>
//	            audience            <aud...>
//	            claim               <name>
//	            leeway              <duration>
//	            expiration_optional
//	        }
//	        key placeholder <value>
//	        cost      <n>
//	        shadow
//	        match {
//	            <matchers...>
//	        }
//	    }
//	}
//
// A rule may be given on one line, "rule default 100 1m", and a rule
// without a key limits the client IP. Several key lines make a chain: the
// first that finds an identity is used.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.Errf("ratekit takes no arguments besides a matcher, but got %q: its options go in a block", d.Val())
	}
	for d.NextBlock(0) {
		if err := h.unmarshalOption(d); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) unmarshalOption(d *caddyfile.Dispenser) error {
	var err error
	switch opt := d.Val(); opt {
	case "redis":
		h.Redis.URL, err = urlArg(d, "redis://127.0.0.1:6379")
	case "redis_cluster":
		h.Redis.ClusterURL, err = urlArg(d, "redis://10.0.0.1:6379?addr=10.0.0.2:6379")
	case "redis_sentinel":
		h.Redis.SentinelURL, err = urlArg(d, "redis://10.0.0.1:26379?master_name=mymaster")
	case "prefix":
		h.Prefix, err = oneArg(d)
	case "timeout":
		h.Timeout, err = durationArg(d)
	case "fail":
		h.Fail, err = choiceArg(d, "local", "open", "closed")
	case "fail_closed_status":
		h.FailClosedStatus, err = intArg(d)
	case "replicas":
		h.Replicas, err = intArg(d)
	case "breaker":
		h.Breaker, err = unmarshalBreaker(d)
	case "lease":
		h.Lease, err = unmarshalLease(d)
	case "denied_cache":
		var n int
		n, err = intArg(d)
		h.DeniedCache = &n
	case "batching":
		var v string
		v, err = choiceArg(d, "on", "off")
		b := v == "on"
		h.Batching = &b
	case "headers":
		h.Headers, err = choiceArg(d, "both", "legacy", "ietf", "none")
	case "ietf_draft":
		h.IETFDraft, err = intArg(d)
	case "no_identity":
		h.NoIdentity, err = choiceArg(d, "next", "401")
	case "rule":
		var r Rule
		r, err = unmarshalRule(d)
		h.Rules = append(h.Rules, r)
	default:
		return d.Errf("unknown ratekit option %q", opt)
	}
	return err
}

func unmarshalBreaker(d *caddyfile.Dispenser) (*Breaker, error) {
	b := new(Breaker)
	args := d.RemainingArgs()
	if len(args) > 3 {
		return nil, d.Errf("breaker takes at most three arguments (failures, backoff, max_backoff), got %d", len(args))
	}
	for i, a := range args {
		var err error
		switch i {
		case 0:
			b.Failures, err = strconv.Atoi(a)
		case 1:
			b.Backoff, err = parseDuration(a)
		case 2:
			b.MaxBackoff, err = parseDuration(a)
		}
		if err != nil {
			return nil, d.Errf("breaker: bad argument %q: %v", a, err)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "failures":
			b.Failures, err = intArg(d)
		case "backoff":
			b.Backoff, err = durationArg(d)
		case "max_backoff":
			b.MaxBackoff, err = durationArg(d)
		default:
			return nil, d.Errf("unknown breaker option %q", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func unmarshalLease(d *caddyfile.Dispenser) (*Lease, error) {
	l := new(Lease)
	switch args := d.RemainingArgs(); len(args) {
	case 0:
	case 1:
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return nil, d.Errf("lease: size %q is not a whole number", args[0])
		}
		l.Size = n
	default:
		return nil, d.Errf("lease takes at most one argument, the lease size")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "size":
			l.Size, err = intArg(d)
		case "hold":
			l.Hold, err = durationArg(d)
		default:
			return nil, d.Errf("unknown lease option %q", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return l, nil
}

func unmarshalRule(d *caddyfile.Dispenser) (Rule, error) {
	var r Rule
	args := d.RemainingArgs()
	switch len(args) {
	case 1, 3:
	default:
		return r, d.Errf("rule takes a name, optionally followed by a limit and a period (rule default 100 1m), got %d arguments", len(args))
	}
	r.Name = args[0]
	if len(args) == 3 {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return r, d.Errf("rule %s: limit %q is not a number of requests", r.Name, args[1])
		}
		r.Limit = n
		if r.Period, err = parseDuration(args[2]); err != nil {
			return r, d.Errf("rule %s: period %q: %v", r.Name, args[2], err)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "limit":
			r.Limit, err = intArg(d)
		case "period":
			r.Period, err = durationArg(d)
		case "burst":
			r.Burst, err = intArg(d)
		case "algorithm":
			r.Algorithm, err = choiceArg(d, "gcra", "fixed", "sliding-log", "sliding-counter")
		case "cost":
			r.Cost, err = intArg(d)
		case "shadow":
			if d.NextArg() {
				return r, d.ArgErr()
			}
			r.Shadow = true
		case "key":
			var k Key
			k, err = unmarshalKey(d)
			r.Keys = append(r.Keys, k)
		case "match":
			var set caddy.ModuleMap
			set, err = caddyhttp.ParseCaddyfileNestedMatcherSet(d)
			r.MatcherSetsRaw = append(r.MatcherSetsRaw, set)
		default:
			return r, d.Errf("rule %s: unknown option %q", r.Name, d.Val())
		}
		if err != nil {
			return r, err
		}
	}
	if r.Limit == 0 || r.Period == 0 {
		return r, d.Errf("rule %s: a limit and a period are required (rule %s 100 1m, or limit and period in its block)", r.Name, r.Name)
	}
	return r, nil
}

func unmarshalKey(d *caddyfile.Dispenser) (Key, error) {
	var k Key
	if !d.NextArg() {
		return k, d.Errf("key needs a source: ip, header, jwt, apikey or placeholder")
	}
	k.Source = d.Val()
	args := d.RemainingArgs()
	var err error
	switch k.Source {
	case SourceIP:
		switch len(args) {
		case 0:
		case 1:
			if k.IPv6Prefix, err = strconv.Atoi(args[0]); err != nil {
				return k, d.Errf("key ip: the IPv6 prefix length %q is not a number", args[0])
			}
		default:
			return k, d.Errf("key ip takes at most one argument, the IPv6 prefix length")
		}
	case SourceHeader:
		if len(args) != 1 {
			return k, d.Errf("key header takes one argument, the header field")
		}
		k.Header = args[0]
	case SourcePlaceholder:
		if len(args) != 1 {
			return k, d.Errf("key placeholder takes one argument, such as {http.auth.user.id}")
		}
		k.Value = args[0]
	case SourceAPIKey:
		switch len(args) {
		case 0:
		case 1:
			k.Header = args[0]
		default:
			return k, d.Errf("key apikey takes at most one argument, the header field")
		}
		err = unmarshalKeyBlock(d, &k, "header", "query", "auth_scheme", "hash_secret")
	case SourceJWT:
		if len(args) != 0 {
			return k, d.Errf("key jwt takes no arguments: its options go in a block")
		}
		err = unmarshalKeyBlock(d, &k, "secret", "public_key_file", "algorithms", "issuer", "audience", "claim", "leeway", "expiration_optional")
		if err == nil && k.Secret == "" && k.PublicKeyFile == "" {
			return k, d.Errf("key jwt needs a secret or a public_key_file")
		}
	default:
		return k, d.Errf("unknown key source %q (want ip, header, jwt, apikey or placeholder)", k.Source)
	}
	if err != nil {
		return k, err
	}
	if k.Source != SourceAPIKey && k.Source != SourceJWT && d.NextBlock(d.Nesting()) {
		return k, d.Errf("key %s takes no block", k.Source)
	}
	return k, nil
}

// unmarshalKeyBlock reads the options of a key's block, of the names
// allowed.
func unmarshalKeyBlock(d *caddyfile.Dispenser, k *Key, allowed ...string) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if !slices.Contains(allowed, opt) {
			return d.Errf("key %s: unknown option %q", k.Source, opt)
		}
		var err error
		switch opt {
		case "header":
			k.Header, err = oneArg(d)
		case "query":
			k.Query, err = oneArg(d)
		case "auth_scheme":
			k.AuthScheme, err = oneArg(d)
		case "hash_secret":
			k.HashSecret, err = oneArg(d)
		case "secret":
			k.Secret, err = oneArg(d)
		case "public_key_file":
			k.PublicKeyFile, err = oneArg(d)
		case "algorithms":
			k.Algorithms = d.RemainingArgs()
			if len(k.Algorithms) == 0 {
				return d.ArgErr()
			}
		case "issuer":
			k.Issuer, err = oneArg(d)
		case "audience":
			k.Audience = d.RemainingArgs()
			if len(k.Audience) == 0 {
				return d.ArgErr()
			}
		case "claim":
			k.Claim, err = oneArg(d)
		case "leeway":
			k.Leeway, err = durationArg(d)
		case "expiration_optional":
			if d.NextArg() {
				return d.ArgErr()
			}
			k.ExpirationOptional = true
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// oneArg returns the option's one argument.
func oneArg(d *caddyfile.Dispenser) (string, error) {
	opt := d.Val()
	args := d.RemainingArgs()
	if len(args) != 1 {
		return "", d.Errf("%s takes one argument, got %d", opt, len(args))
	}
	return args[0], nil
}

// urlArg returns the option's one argument, a Redis URL; an empty
// environment variable in its place leaves none.
func urlArg(d *caddyfile.Dispenser, example string) (string, error) {
	opt := d.Val()
	args := d.RemainingArgs()
	switch len(args) {
	case 1:
		return args[0], nil
	case 0:
		return "", d.Errf("%s needs a Redis URL, such as %s (is the environment variable in its place empty?)", opt, example)
	}
	return "", d.Errf("%s takes one URL, got %d arguments", opt, len(args))
}

func intArg(d *caddyfile.Dispenser) (int, error) {
	opt := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, d.Errf("%s: %q is not a whole number", opt, s)
	}
	return n, nil
}

func durationArg(d *caddyfile.Dispenser) (caddy.Duration, error) {
	opt := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	v, err := parseDuration(s)
	if err != nil {
		return 0, d.Errf("%s: %q is not a duration (such as 50ms, 1m or 1d): %v", opt, s, err)
	}
	return v, nil
}

func parseDuration(s string) (caddy.Duration, error) {
	v, err := caddy.ParseDuration(s)
	return caddy.Duration(v), err
}

func choiceArg(d *caddyfile.Dispenser, choices ...string) (string, error) {
	opt := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return "", err
	}
	if !slices.Contains(choices, s) {
		return "", d.Errf("%s: %q is not one of %v", opt, s, choices)
	}
	return s, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
