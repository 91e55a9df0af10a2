package keyfuncs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sync"

	"github.com/ratekit/ratekit/core"
)

// MaxAPIKeyLen is the length, in bytes, of the longest API key that [APIKey]
// accepts, counting any whitespace around it in a header. A longer key
// yields no identity without being hashed.
const MaxAPIKeyLen = 512

// DefaultAPIKeyHeader is the header that [APIKey] reads unless told
// otherwise.
const DefaultAPIKeyHeader = "X-API-Key"

// APIKeyOption configures [APIKey].
type APIKeyOption func(*apiKeyConfig) error

type sourceKind uint8

const (
	sourceHeader sourceKind = iota
	sourceAuthScheme
	sourceQuery
)

type keySource struct {
	kind sourceKind
	name string
}

type apiKeyConfig struct {
	sources []keySource
	secret  []byte
}

// FromHeader reads the API key from the named header, surrounding
// whitespace trimmed. Sources are tried in the order given, and the first
// that carries a key is used.
//
// Default, when no source is given: FromHeader("X-API-Key")
// ([DefaultAPIKeyHeader]).
func FromHeader(name string) APIKeyOption {
	return func(c *apiKeyConfig) error {
		if !isToken(name) {
			return fmt.Errorf("keyfuncs: invalid header name %q", name)
		}
		c.sources = append(c.sources, keySource{sourceHeader, name})
		return nil
	}
}

// FromAuthScheme reads the API key from an Authorization header that uses
// the named scheme, compared without regard to case: with "ApiKey",
// "Authorization: ApiKey abc123" carries the key "abc123". See [FromHeader]
// for the order of sources.
func FromAuthScheme(scheme string) APIKeyOption {
	return func(c *apiKeyConfig) error {
		if !isToken(scheme) {
			return fmt.Errorf("keyfuncs: invalid authentication scheme %q", scheme)
		}
		c.sources = append(c.sources, keySource{sourceAuthScheme, scheme})
		return nil
	}
}

// FromQuery reads the API key from the named query parameter. See
// [FromHeader] for the order of sources. Prefer a header: query strings are
// written to access logs, proxy logs and browser history, where keys leak.
func FromQuery(param string) APIKeyOption {
	return func(c *apiKeyConfig) error {
		if param == "" {
			return errors.New("keyfuncs: empty query parameter name")
		}
		c.sources = append(c.sources, keySource{sourceQuery, param})
		return nil
	}
}

// HashSecret keys the hash of API keys with a server secret, making it
// HMAC-SHA256. The secret must not be empty; it is copied.
//
// Default: no secret, plain SHA-256. Either way the raw key never reaches
// Redis, a log line or a metric label, but without a secret anyone who
// reads the identities (Redis keys, logs) can test guesses of short or
// low-entropy keys offline; with one, only the holder of the secret can.
// Changing the secret changes every identity, which resets every API key's
// limits.
func HashSecret(secret []byte) APIKeyOption {
	return func(c *apiKeyConfig) error {
		if len(secret) == 0 {
			return errors.New("keyfuncs: empty API key hash secret")
		}
		c.secret = slices.Clone(secret)
		return nil
	}
}

var (
	errNoAPIKey      = fmt.Errorf("keyfuncs: no API key: %w", core.ErrNoIdentity)
	errAPIKeyTooLong = fmt.Errorf("keyfuncs: API key longer than %d bytes: %w", MaxAPIKeyLen, core.ErrNoIdentity)
)

// APIKey returns a key function whose identity is a hash of the client's API
// key: "apikey:" followed by the first 16 bytes (128 bits) of its SHA-256
// digest, or HMAC-SHA256 digest with [HashSecret], in lower-case hex. The same
// key gives the same identity from every source. The raw key appears in no
// identity and no error.
//
// APIKey does not check that the key is valid: that is the application's
// job. Made-up keys each get an identity of their own, so combine APIKey with
// a limit that made-up keys cannot escape, such as [First](APIKey, IP) behind
// authentication that rejects unknown keys, or a separate rule keyed by [IP].
//
// A request without a key, or with one longer than [MaxAPIKeyLen], yields an
// error wrapping [core.ErrNoIdentity].
func APIKey(opts ...APIKeyOption) (core.KeyFunc, error) {
	c := &apiKeyConfig{}
	for _, o := range opts {
		if o == nil {
			return nil, errNilOption
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if len(c.sources) == 0 {
		c.sources = []keySource{{sourceHeader, DefaultAPIKeyHeader}}
	}
	sum := keyHash(c.secret)
	sources := c.sources
	return func(r core.Request) (string, error) {
		for _, s := range sources {
			raw, ok := s.read(r)
			if !ok {
				continue
			}
			if len(raw) > MaxAPIKeyLen {
				return "", errAPIKeyTooLong
			}
			if s.kind != sourceQuery {
				raw = trimOWS(raw)
			}
			if raw == "" {
				continue
			}
			d := sum(raw)
			var buf [len("apikey:") + 32]byte
			n := copy(buf[:], "apikey:")
			hex.Encode(buf[n:], d[:16])
			return string(buf[:]), nil
		}
		return "", errNoAPIKey
	}, nil
}

// keyHash returns the hash of API keys: SHA-256, or HMAC-SHA256 under
// secret when it is set.
func keyHash(secret []byte) func(key string) [sha256.Size]byte {
	if secret == nil {
		return func(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }
	}
	pool := &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
	return func(key string) [sha256.Size]byte {
		h := pool.Get().(hash.Hash)
		h.Reset()
		h.Write([]byte(key))
		var out [sha256.Size]byte
		h.Sum(out[:0])
		pool.Put(h)
		return out
	}
}

// read returns the raw key that s finds in r, untrimmed, and false when an
// Authorization header does not use s's scheme.
func (s keySource) read(r core.Request) (string, bool) {
	switch s.kind {
	case sourceHeader:
		return r.Header(s.name), true
	case sourceAuthScheme:
		h := r.Header("Authorization")
		if !hasAuthScheme(h, s.name) {
			return "", false
		}
		return h[len(s.name)+1:], true
	case sourceQuery:
		return r.Query(s.name), true
	}
	return "", false
}
