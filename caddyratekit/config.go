package caddyratekit

import (
	"cmp"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Rule is one named limit of a handler, as in [core.Rule]: every request
// it applies to spends Cost units of Limit per Period from the identity
// its key finds.
type Rule struct {
	// Name identifies the rule in Redis keys, header fields and logs.
	// Instances that share a Redis and a prefix and name a rule alike
	// share its limit. Required; at most 128 bytes, without '{', '}',
	// control bytes or, with the IETF header fields on, anything but
	// printable ASCII.
	Name string `json:"name"`

	// Limit is how many units the rule allows per Period. Required, from
	// 1 to 2^30.
	Limit int `json:"limit"`

	// Period is the window the limit refills over, from 1ms to 366 days
	// in whole milliseconds. Required.
	Period caddy.Duration `json:"period"`

	// Burst is the GCRA bucket's capacity: how many units may pass at
	// once after a quiet spell. The limit by default; the window
	// algorithms ignore it.
	Burst int `json:"burst,omitempty"`

	// Algorithm is gcra (the default), fixed, sliding-log or
	// sliding-counter; see the repository's README for each one's
	// exactness and state.
	Algorithm string `json:"algorithm,omitempty"`

	// Keys say whose limit a request spends. The first key that finds an
	// identity in the request is used (keyfuncs.First); a request none of
	// them identifies skips the rule, or is answered 401 under
	// no_identity 401. The client's IP address by default.
	Keys []Key `json:"keys,omitempty"`

	// Cost is how many units each request spends; 1 by default.
	Cost int `json:"cost,omitempty"`

	// Shadow decides and spends as usual, and sets the header fields and
	// placeholders, but never denies: to watch a new limit on live
	// traffic before enforcing it.
	Shadow bool `json:"shadow,omitempty"`

	// MatcherSetsRaw limits the rule to the requests that match one of
	// these matcher sets (Caddy's own request matchers, such as path or
	// method): the handler's other rules still apply to the rest. All
	// requests the handler sees by default.
	MatcherSetsRaw caddyhttp.RawMatcherSets `json:"match,omitempty" caddy:"namespace=http.matchers"`

	matchers caddyhttp.MatcherSets
}

// Key sources.
const (
	SourceIP          = "ip"
	SourceHeader      = "header"
	SourceJWT         = "jwt"
	SourceAPIKey      = "apikey"
	SourcePlaceholder = "placeholder"
)

// Key is where a rule finds the identity it limits. Placeholders such as
// {env.JWT_SECRET} are replaced, at provisioning, in Secret, PublicKeyFile
// and HashSecret.
type Key struct {
	// Source is one of:
	//
	//   - "ip": the client's IP address as Caddy determines it, which
	//     follows the server's trusted_proxies (and
	//     trusted_proxies_strict, which should be set whenever
	//     trusted_proxies is: without it Caddy takes the leftmost
	//     address of X-Forwarded-For, which the client writes); IPv6
	//     clients grouped by IPv6Prefix. Identity "ip:203.0.113.7".
	//   - "header": the value of Header, for a header that a trusted
	//     gateway sets and clients cannot. Identity
	//     "header:X-Tenant-Id:acme".
	//   - "jwt": the user named by a verified bearer token, signed with
	//     Secret (HMAC) or the key in PublicKeyFile. Identity
	//     "user:<claim>".
	//   - "apikey": a hash of the client's API key, from Header
	//     (X-API-Key by default), Query or AuthScheme. Identity
	//     "apikey:<hex>"; the key itself never reaches Redis.
	//   - "placeholder": Value with its placeholders replaced, such as
	//     {http.auth.user.id} set by an authentication handler before
	//     this one. Identity "placeholder:<value>"; empty means none.
	Source string `json:"source"`

	// IPv6Prefix groups IPv6 clients by this prefix length (ip); 64 by
	// default, 128 to limit single addresses.
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`

	// Header is the header field that carries the identity (header) or
	// the API key (apikey).
	Header string `json:"header,omitempty"`
	// Query is the query parameter that carries the API key (apikey).
	Query string `json:"query,omitempty"`
	// AuthScheme is the Authorization scheme that carries the API key
	// (apikey), such as ApiKey.
	AuthScheme string `json:"auth_scheme,omitempty"`
	// HashSecret keys the API key's hash (HMAC-SHA256) with a server
	// secret, so that nobody without it can test guessed keys against
	// the identities in Redis (apikey).
	HashSecret string `json:"hash_secret,omitempty"`

	// Secret is the HMAC secret that signs tokens (jwt).
	Secret string `json:"secret,omitempty"`
	// PublicKeyFile is a PEM file holding the RSA, ECDSA or Ed25519
	// public key (or a certificate) that verifies tokens (jwt).
	PublicKeyFile string `json:"public_key_file,omitempty"`
	// Algorithms are the accepted signing algorithms (jwt): HS256 by
	// default with Secret, the key's own with PublicKeyFile.
	Algorithms []string `json:"algorithms,omitempty"`
	// Issuer, when set, must be the token's iss (jwt).
	Issuer string `json:"issuer,omitempty"`
	// Audience, when set, must contain one of the token's aud (jwt).
	Audience []string `json:"audience,omitempty"`
	// Claim names the claim that holds the user (jwt); sub by default.
	Claim string `json:"claim,omitempty"`
	// Leeway is the clock skew allowed on exp, nbf and iat (jwt); 30s by
	// default.
	Leeway caddy.Duration `json:"leeway,omitempty"`
	// ExpirationOptional accepts tokens without exp (jwt).
	ExpirationOptional bool `json:"expiration_optional,omitempty"`

	// Value is the text whose placeholders give the identity
	// (placeholder).
	Value string `json:"value,omitempty"`
}

// Breaker configures the Limiter's circuit breaker ([core.BreakerConfig]).
type Breaker struct {
	// Failures is how many consecutive failed Redis calls open the
	// breaker; 5 by default.
	Failures int `json:"failures,omitempty"`
	// Backoff is the wait before the first probe; 100ms by default,
	// doubled by each failed probe.
	Backoff caddy.Duration `json:"backoff,omitempty"`
	// MaxBackoff caps the wait between probes; 1s by default.
	MaxBackoff caddy.Duration `json:"max_backoff,omitempty"`
}

// Lease turns on hot-key leasing (package leasestore): a key hot enough
// takes a batch of units from Redis at once and this instance spends them
// locally for a short hold, so that it costs Redis one call per lease
// instead of one per request. The price is a bounded overshoot: per window
// the fleet admits at most limit + (size − 1) × instances. Off by default;
// leave it off where each unit must be exact.
type Lease struct {
	// Size is the most units one lease takes; by default 1/64 of the
	// limit's capacity (at most 65,536), so that each instance overshoots
	// by under 1/64 of a limit, and a limit under 128 is never leased.
	Size int `json:"size,omitempty"`
	// Hold is how long leased units may be spent; 100ms by default.
	Hold caddy.Duration `json:"hold,omitempty"`
}

// Redis says which Redis holds the limits, as a URL that go-redis parses
// (its ParseURL, ParseClusterURL and ParseFailoverURL), so that
// credentials, TLS (rediss://), the database and pool settings
// (?pool_size=20&dial_timeout=1s) are all in one string. Give exactly
// one. Placeholders such as {env.REDIS_URL} are replaced at provisioning.
type Redis struct {
	// URL of one server: redis://[[user]:password@]host:port[/db],
	// rediss:// for TLS, or unix:///path/to/socket.
	URL string `json:"url,omitempty"`
	// ClusterURL names seed nodes of a Redis Cluster:
	// redis://[[user]:password@]host1:port?addr=host2:port&addr=host3:port.
	ClusterURL string `json:"cluster_url,omitempty"`
	// SentinelURL names the Sentinels and the master they watch:
	// redis://host1:26379?addr=host2:26379&master_name=mymaster.
	SentinelURL string `json:"sentinel_url,omitempty"`
}

// header style, failure policy and no-identity names, as the Caddyfile
// and JSON spell them.
var (
	headerStyles = map[string]adapter.HeaderStyle{
		"both": adapter.HeadersBoth, "legacy": adapter.HeadersLegacy,
		"ietf": adapter.HeadersIETF, "none": adapter.HeadersNone,
	}
	noIdentityPolicies = map[string]adapter.NoIdentityPolicy{
		"next": adapter.NoIdentityNext, "401": adapter.NoIdentity401,
	}
)

// configErr returns a configuration error. Caddy prefixes it with the
// module's name.
func configErr(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// validate checks what can be checked of r without building it, and
// returns r's limit.
func (r *Rule) validate() (core.Limit, error) {
	if r.Name == "" {
		return core.Limit{}, configErr("a rule needs a name")
	}
	if r.Limit <= 0 {
		return core.Limit{}, configErr("rule %q: limit must be a positive number of requests, not %d", r.Name, r.Limit)
	}
	if r.Period <= 0 {
		return core.Limit{}, configErr("rule %q: period must be positive (such as 1m)", r.Name)
	}
	if r.Burst < 0 {
		return core.Limit{}, configErr("rule %q: burst must not be negative", r.Name)
	}
	if r.Cost < 0 {
		return core.Limit{}, configErr("rule %q: cost must be positive", r.Name)
	}
	lim := core.Limit{Rate: r.Limit, Period: time.Duration(r.Period), Burst: cmp.Or(r.Burst, r.Limit)}
	if r.Algorithm != "" {
		alg, err := core.ParseAlgorithm(r.Algorithm)
		if err != nil {
			return core.Limit{}, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		lim.Algorithm = alg
	}
	if err := lim.Validate(); err != nil {
		return core.Limit{}, fmt.Errorf("rule %q: %w", r.Name, err)
	}
	for i := range r.Keys {
		if err := r.Keys[i].validate(); err != nil {
			return core.Limit{}, fmt.Errorf("rule %q: %w", r.Name, err)
		}
	}
	return lim, nil
}

// validate checks the fields of k that its source uses, and refuses those
// it does not.
func (k *Key) validate() error {
	used := map[string]bool{}
	switch k.Source {
	case SourceIP:
		used["ipv6_prefix"] = true
		if k.IPv6Prefix < 0 || k.IPv6Prefix > 128 {
			return fmt.Errorf("key ip: ipv6_prefix must be from 1 to 128, not %d", k.IPv6Prefix)
		}
	case SourceHeader:
		used["header"] = true
		if k.Header == "" {
			return errors.New("key header: the header field to read is required")
		}
	case SourceAPIKey:
		used["header"], used["query"], used["auth_scheme"], used["hash_secret"] = true, true, true, true
	case SourceJWT:
		for _, f := range []string{"secret", "public_key_file", "algorithms", "issuer", "audience", "claim", "leeway", "expiration_optional"} {
			used[f] = true
		}
		if (k.Secret == "") == (k.PublicKeyFile == "") {
			return errors.New("key jwt: exactly one of secret and public_key_file is required")
		}
		if k.Leeway < 0 {
			return errors.New("key jwt: leeway must not be negative")
		}
	case SourcePlaceholder:
		used["value"] = true
		if k.Value == "" {
			return errors.New("key placeholder: a value with placeholders is required")
		}
	case "":
		return errors.New("a key needs a source: ip, header, jwt, apikey or placeholder")
	default:
		return fmt.Errorf("unknown key source %q (want ip, header, jwt, apikey or placeholder)", k.Source)
	}
	for name, set := range k.fields() {
		if set && !used[name] {
			return fmt.Errorf("key %s: field %s does not apply to this source", k.Source, name)
		}
	}
	return nil
}

// fields reports which of k's optional fields are set, by JSON name.
func (k *Key) fields() map[string]bool {
	return map[string]bool{
		"ipv6_prefix": k.IPv6Prefix != 0, "header": k.Header != "", "query": k.Query != "",
		"auth_scheme": k.AuthScheme != "", "hash_secret": k.HashSecret != "",
		"secret": k.Secret != "", "public_key_file": k.PublicKeyFile != "",
		"algorithms": len(k.Algorithms) > 0, "issuer": k.Issuer != "", "audience": len(k.Audience) > 0,
		"claim": k.Claim != "", "leeway": k.Leeway != 0, "expiration_optional": k.ExpirationOptional,
		"value": k.Value != "",
	}
}

// build returns k's key function. repl replaces the placeholders of its
// secrets and files.
func (k *Key) build(repl *caddy.Replacer) (core.KeyFunc, error) {
	switch k.Source {
	case SourceIP:
		var opts []keyfuncs.IPOption
		if k.IPv6Prefix != 0 {
			opts = append(opts, keyfuncs.IPv6Prefix(k.IPv6Prefix))
		}
		// no trusted proxies: the request's RemoteAddr is already the
		// client address that Caddy determined (see request.RemoteAddr)
		return keyfuncs.IP(opts...)
	case SourceHeader:
		return keyfuncs.Header(k.Header)
	case SourceAPIKey:
		var opts []keyfuncs.APIKeyOption
		if k.Header != "" {
			opts = append(opts, keyfuncs.FromHeader(k.Header))
		}
		if k.AuthScheme != "" {
			opts = append(opts, keyfuncs.FromAuthScheme(k.AuthScheme))
		}
		if k.Query != "" {
			opts = append(opts, keyfuncs.FromQuery(k.Query))
		}
		if k.HashSecret != "" {
			secret, err := replaceSecret(repl, "hash_secret", k.HashSecret)
			if err != nil {
				return nil, err
			}
			opts = append(opts, keyfuncs.HashSecret([]byte(secret)))
		}
		return keyfuncs.APIKey(opts...)
	case SourceJWT:
		return k.buildJWT(repl)
	case SourcePlaceholder:
		return placeholderKey(k.Value), nil
	}
	return nil, k.validate()
}

func (k *Key) buildJWT(repl *caddy.Replacer) (core.KeyFunc, error) {
	var opts []keyfuncs.JWTOption
	if len(k.Algorithms) > 0 {
		opts = append(opts, keyfuncs.Algorithms(k.Algorithms...))
	}
	if k.Issuer != "" {
		opts = append(opts, keyfuncs.Issuer(k.Issuer))
	}
	if len(k.Audience) > 0 {
		opts = append(opts, keyfuncs.Audience(k.Audience...))
	}
	if k.Claim != "" {
		opts = append(opts, keyfuncs.Claim(k.Claim))
	}
	if k.Leeway != 0 {
		opts = append(opts, keyfuncs.Leeway(time.Duration(k.Leeway)))
	}
	if k.ExpirationOptional {
		opts = append(opts, keyfuncs.ExpirationOptional())
	}
	if k.Secret != "" {
		secret, err := replaceSecret(repl, "secret", k.Secret)
		if err != nil {
			return nil, err
		}
		return keyfuncs.JWTHMAC([]byte(secret), opts...)
	}
	path, err := replaceSecret(repl, "public_key_file", k.PublicKeyFile)
	if err != nil {
		return nil, err
	}
	pub, err := readPublicKey(path)
	if err != nil {
		return nil, err
	}
	return keyfuncs.JWTPublicKey(pub, opts...)
}

// replaceSecret replaces the placeholders of a secret's value, and refuses
// a value that ends up empty or that names an unknown placeholder, such as
// an environment variable that is not set.
func replaceSecret(repl *caddy.Replacer, field, v string) (string, error) {
	out, err := repl.ReplaceOrErr(v, true, true)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	if out == "" {
		return "", fmt.Errorf("%s is empty once its placeholders are replaced", field)
	}
	return out, nil
}

// readPublicKey reads the first public key or certificate of a PEM file.
func readPublicKey(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("public_key_file: %w", err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("public_key_file %s: no PUBLIC KEY or CERTIFICATE block", path)
		}
		switch block.Type {
		case "PUBLIC KEY":
			pub, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public_key_file %s: %w", path, err)
			}
			return pub, nil
		case "RSA PUBLIC KEY":
			pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public_key_file %s: %w", path, err)
			}
			return pub, nil
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public_key_file %s: %w", path, err)
			}
			return cert.PublicKey, nil
		}
	}
}

// placeholderKey returns a key function whose identity is value with the
// request's placeholders replaced.
func placeholderKey(value string) core.KeyFunc {
	return func(req core.Request) (string, error) {
		repl, ok := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok {
			return "", fmt.Errorf("%w: no Caddy replacer in the request", core.ErrNoIdentity)
		}
		id := strings.TrimSpace(repl.ReplaceAll(value, ""))
		if id == "" {
			return "", fmt.Errorf("%w: %s is empty", core.ErrNoIdentity, value)
		}
		return "placeholder:" + id, nil
	}
}

// validate checks that r names one Redis.
func (r *Redis) validate() error {
	n := 0
	for _, u := range []string{r.URL, r.ClusterURL, r.SentinelURL} {
		if u != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return configErr("redis: a url, cluster_url or sentinel_url is required")
	case n > 1:
		return configErr("redis: give only one of url, cluster_url and sentinel_url")
	}
	return nil
}
