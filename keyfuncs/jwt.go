package keyfuncs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
)

// MaxTokenLen is the length, in bytes, of the longest bearer token that the
// JWT key functions parse. A longer token yields no identity without being
// decoded, so a client cannot make the server decode and verify megabytes
// per request.
const MaxTokenLen = 8 << 10

// DefaultLeeway is the clock skew that the JWT key functions allow when they
// check "exp", "nbf" and "iat", unless [Leeway] says otherwise.
const DefaultLeeway = 30 * time.Second

// DefaultClaim is the claim whose value the JWT key functions use as the
// user, unless [Claim] says otherwise.
const DefaultClaim = "sub"

// JWTOption configures [JWT], [JWTHMAC] and [JWTPublicKey], and the claim
// readers [JWTClaim], [JWTClaimHMAC] and [JWTClaimPublicKey].
type JWTOption func(*jwtConfig) error

type jwtConfig struct {
	algs        []string
	leeway      time.Duration
	issuer      string
	audience    []string
	claim       string
	claimSet    bool // Claim was given
	expOptional bool
}

type algFamily uint8

const (
	familyHMAC algFamily = iota + 1
	familyRSA
	familyECDSA
	familyEdDSA
)

// algFamilies lists the algorithms the JWT key functions accept, by the kind
// of key that verifies them. "none" is deliberately absent.
var algFamilies = map[string]algFamily{
	"HS256": familyHMAC, "HS384": familyHMAC, "HS512": familyHMAC,
	"RS256": familyRSA, "RS384": familyRSA, "RS512": familyRSA,
	"PS256": familyRSA, "PS384": familyRSA, "PS512": familyRSA,
	"ES256": familyECDSA, "ES384": familyECDSA, "ES512": familyECDSA,
	"EdDSA": familyEdDSA,
}

// Algorithms lists the signing algorithms ("alg" header values) that are
// accepted, such as "RS256" or "HS256", "HS512". A token signed with any
// other algorithm yields no identity.
//
// Required by [JWT]. Default for [JWTHMAC]: HS256; for [JWTPublicKey]: RS256
// for an RSA key, the curve's ES algorithm for an ECDSA key, EdDSA for an
// Ed25519 key.
//
// "none" is never accepted, so an unsigned token cannot name its own user.
// HMAC algorithms (HS*) and public-key algorithms cannot be listed together:
// that prevents algorithm confusion, in which a token is HMAC-signed with the
// server's public key, which everybody knows, and is verified as if the
// public key were an HMAC secret.
func Algorithms(names ...string) JWTOption {
	return func(c *jwtConfig) error {
		if len(names) == 0 {
			return errors.New("keyfuncs: Algorithms needs at least one algorithm")
		}
		algs := make([]string, 0, len(names))
		for _, n := range names {
			if _, ok := algFamilies[n]; !ok {
				if strings.EqualFold(n, "none") {
					return errors.New(`keyfuncs: algorithm "none" is never accepted`)
				}
				return fmt.Errorf("keyfuncs: unsupported JWT algorithm %q", n)
			}
			if !slices.Contains(algs, n) {
				algs = append(algs, n)
			}
		}
		c.algs = algs
		return nil
	}
}

// Leeway sets the clock skew allowed when "exp", "nbf" and "iat" are checked.
//
// Default: 30 seconds ([DefaultLeeway]). Keep it small: a token is accepted
// this long after it expires.
func Leeway(d time.Duration) JWTOption {
	return func(c *jwtConfig) error {
		if d < 0 {
			return fmt.Errorf("keyfuncs: negative leeway %v", d)
		}
		c.leeway = d
		return nil
	}
}

// Issuer requires the "iss" claim to equal iss.
//
// Default: the issuer is not checked. Set it when the key verifies tokens of
// several issuers, so that a token minted for another purpose does not count
// as a user here.
func Issuer(iss string) JWTOption {
	return func(c *jwtConfig) error {
		if iss == "" {
			return errors.New("keyfuncs: empty issuer")
		}
		c.issuer = iss
		return nil
	}
}

// Audience requires the "aud" claim to contain at least one of aud.
//
// Default: the audience is not checked. Set it when the issuer mints tokens
// for several services, so that a token meant for another service does not
// count as a user here.
func Audience(aud ...string) JWTOption {
	return func(c *jwtConfig) error {
		if len(aud) == 0 || slices.Contains(aud, "") {
			return errors.New("keyfuncs: Audience needs non-empty audiences")
		}
		c.audience = slices.Clone(aud)
		return nil
	}
}

// Claim names the top-level claim whose value is the user: a non-empty
// string, or a number, written in decimal without an exponent ("user:42").
// A token without it, or with a value of another type, yields no identity.
//
// Default: "sub" ([DefaultClaim]). The claim readers ([JWTClaim] and its
// kin) take the claim they read as an argument and refuse this option.
func Claim(name string) JWTOption {
	return func(c *jwtConfig) error {
		if name == "" {
			return errors.New("keyfuncs: empty claim name")
		}
		c.claim, c.claimSet = name, true
		return nil
	}
}

// ExpirationOptional accepts tokens without an "exp" claim. A token that has
// one is still rejected once it has expired.
//
// Default: "exp" is required, so that a token leaked once does not stand for
// its user forever.
func ExpirationOptional() JWTOption {
	return func(c *jwtConfig) error {
		c.expOptional = true
		return nil
	}
}

var (
	errNoBearer      = fmt.Errorf("keyfuncs: no bearer token: %w", core.ErrNoIdentity)
	errTokenTooLarge = fmt.Errorf("keyfuncs: bearer token longer than %d bytes: %w", MaxTokenLen, core.ErrNoIdentity)
)

// JWT returns a key function whose identity is the user named by a verified
// bearer token ("Authorization: Bearer <token>"): "user:<claim value>".
//
// keyFunc returns the key that verifies a token, as in
// [github.com/golang-jwt/jwt/v5]; it runs only for tokens whose algorithm is
// listed with [Algorithms], which is required. The signature is verified;
// "exp" (required unless [ExpirationOptional]), "nbf" and "iat" are checked
// with [Leeway]; [Issuer] and [Audience] are checked when set.
//
// A missing, malformed, forged, unsigned, expired or not yet valid token, a
// token longer than [MaxTokenLen], or one without the [Claim], yields an
// error wrapping [core.ErrNoIdentity] (and the jwt package's error, where
// there is one): the user is never taken from a token nobody checked.
func JWT(keyFunc jwt.Keyfunc, opts ...JWTOption) (core.KeyFunc, error) {
	v, err := newVerifier(keyFunc, opts)
	if err != nil {
		return nil, err
	}
	return v.userKey(), nil
}

// newVerifier is [JWT]'s verifier.
func newVerifier(keyFunc jwt.Keyfunc, opts []JWTOption) (*verifier, error) {
	if keyFunc == nil {
		return nil, errors.New("keyfuncs: JWT needs a key function")
	}
	c, err := newJWTConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(c.algs) == 0 {
		return nil, errors.New("keyfuncs: JWT needs Algorithms")
	}
	hmacs := 0
	for _, a := range c.algs {
		if algFamilies[a] == familyHMAC {
			hmacs++
		}
	}
	if hmacs > 0 && hmacs < len(c.algs) {
		return nil, fmt.Errorf("keyfuncs: algorithms %q mix HMAC and public-key algorithms", c.algs)
	}
	return c.verifier(keyFunc), nil
}

// JWTHMAC is [JWT] for tokens signed with a shared secret, by default with
// HS256; [Algorithms] may list HS256, HS384 and HS512 only. The secret must
// not be empty; it is copied.
func JWTHMAC(secret []byte, opts ...JWTOption) (core.KeyFunc, error) {
	v, err := newHMACVerifier(secret, opts)
	if err != nil {
		return nil, err
	}
	return v.userKey(), nil
}

// newHMACVerifier is [JWTHMAC]'s verifier.
func newHMACVerifier(secret []byte, opts []JWTOption) (*verifier, error) {
	if len(secret) == 0 {
		return nil, errors.New("keyfuncs: JWTHMAC needs a non-empty secret")
	}
	c, err := newJWTConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := c.restrict([]string{"HS256"}, familyHMAC, ""); err != nil {
		return nil, err
	}
	key := slices.Clone(secret)
	return c.verifier(func(*jwt.Token) (any, error) { return key, nil }), nil
}

// JWTPublicKey is [JWT] for tokens signed with the private key of key, which
// must be an *rsa.PublicKey, an *ecdsa.PublicKey on P-256, P-384 or P-521,
// or an ed25519.PublicKey. The accepted algorithms default to, and
// [Algorithms] may list only, those that the key verifies: RS* and PS* for
// RSA, the curve's own ES algorithm for ECDSA, EdDSA for Ed25519.
func JWTPublicKey(key crypto.PublicKey, opts ...JWTOption) (core.KeyFunc, error) {
	v, err := newPublicKeyVerifier(key, opts)
	if err != nil {
		return nil, err
	}
	return v.userKey(), nil
}

// newPublicKeyVerifier is [JWTPublicKey]'s verifier.
func newPublicKeyVerifier(key crypto.PublicKey, opts []JWTOption) (*verifier, error) {
	c, err := newJWTConfig(opts)
	if err != nil {
		return nil, err
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return nil, errors.New("keyfuncs: JWTPublicKey: nil RSA key")
		}
		err = c.restrict([]string{"RS256"}, familyRSA, "")
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return nil, errors.New("keyfuncs: JWTPublicKey: nil ECDSA key")
		}
		var alg string
		switch k.Curve {
		case elliptic.P256():
			alg = "ES256"
		case elliptic.P384():
			alg = "ES384"
		case elliptic.P521():
			alg = "ES512"
		default:
			return nil, fmt.Errorf("keyfuncs: JWTPublicKey: unsupported ECDSA curve %s", k.Curve.Params().Name)
		}
		err = c.restrict([]string{alg}, familyECDSA, alg)
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, errors.New("keyfuncs: JWTPublicKey: malformed Ed25519 key")
		}
		key = slices.Clone(k)
		err = c.restrict([]string{"EdDSA"}, familyEdDSA, "")
	default:
		return nil, fmt.Errorf("keyfuncs: JWTPublicKey: unsupported key type %T", key)
	}
	if err != nil {
		return nil, err
	}
	return c.verifier(func(*jwt.Token) (any, error) { return key, nil }), nil
}

func newJWTConfig(opts []JWTOption) (*jwtConfig, error) {
	c := &jwtConfig{leeway: DefaultLeeway, claim: DefaultClaim}
	for _, o := range opts {
		if o == nil {
			return nil, errNilOption
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// restrict applies the default algorithms and checks that every configured
// one belongs to family (and, when only is set, equals only).
func (c *jwtConfig) restrict(defaults []string, family algFamily, only string) error {
	if len(c.algs) == 0 {
		c.algs = defaults
	}
	for _, a := range c.algs {
		if algFamilies[a] != family || only != "" && a != only {
			return fmt.Errorf("keyfuncs: algorithm %q does not match the key", a)
		}
	}
	return nil
}

// verifier verifies the bearer tokens of requests.
type verifier struct {
	parser   *jwt.Parser // safe for concurrent use once built
	keyFunc  jwt.Keyfunc
	claim    string // the user claim
	claimSet bool   // the Claim option was given
}

func (c *jwtConfig) verifier(keyFunc jwt.Keyfunc) *verifier {
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(slices.Clone(c.algs)),
		jwt.WithLeeway(c.leeway),
		jwt.WithIssuedAt(),
		jwt.WithJSONNumber(),
	}
	if !c.expOptional {
		popts = append(popts, jwt.WithExpirationRequired())
	}
	if c.issuer != "" {
		popts = append(popts, jwt.WithIssuer(c.issuer))
	}
	if len(c.audience) > 0 {
		popts = append(popts, jwt.WithAudience(c.audience...))
	}
	return &verifier{parser: jwt.NewParser(popts...), keyFunc: keyFunc, claim: c.claim, claimSet: c.claimSet}
}

// verify returns the claims of r's bearer token, verified, or an error
// wrapping core.ErrNoIdentity.
func (v *verifier) verify(r core.Request) (jwt.MapClaims, error) {
	h := r.Header("Authorization")
	if len(h) > len("Bearer ")+MaxTokenLen+64 {
		return nil, errTokenTooLarge
	}
	tok, ok := authCredentials(h, "Bearer")
	if !ok {
		return nil, errNoBearer
	}
	if len(tok) > MaxTokenLen {
		return nil, errTokenTooLarge
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(tok, claims, v.keyFunc); err != nil {
		return nil, fmt.Errorf("keyfuncs: invalid bearer token: %w: %w", err, core.ErrNoIdentity)
	}
	return claims, nil
}

// userKey returns the key function whose identity is "user:" and the
// user claim of a verified token.
func (v *verifier) userKey() core.KeyFunc {
	claim := v.claim
	errNoClaim := fmt.Errorf("keyfuncs: token has no string or number %q claim: %w", claim, core.ErrNoIdentity)
	return func(r core.Request) (string, error) {
		claims, err := v.verify(r)
		if err != nil {
			return "", err
		}
		u, ok := claimValue(claims[claim])
		if !ok {
			return "", errNoClaim
		}
		return "user:" + u, nil
	}
}

// authCredentials returns the credentials of an Authorization header value
// that uses scheme, compared without regard to case: "Bearer abc" → "abc".
func authCredentials(h, scheme string) (string, bool) {
	if !hasAuthScheme(h, scheme) {
		return "", false
	}
	cred := trimOWS(h[len(scheme)+1:])
	return cred, cred != ""
}

// hasAuthScheme reports whether the Authorization header value h starts with
// scheme, compared without regard to case, and a space or tab.
func hasAuthScheme(h, scheme string) bool {
	return len(h) > len(scheme) && (h[len(scheme)] == ' ' || h[len(scheme)] == '\t') &&
		equalFoldASCII(h[:len(scheme)], scheme)
}

// equalFoldASCII reports whether a and b are equal under ASCII case folding;
// unlike strings.EqualFold it never treats non-ASCII letters ("K", the
// Kelvin sign) as equal to ASCII ones.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// claimValue formats a claim as a user: a non-empty string as is, a number
// in decimal without an exponent (1e3 and 1000 are the same user).
func claimValue(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, v != ""
	case json.Number:
		return formatNumber(string(v))
	}
	return "", false
}

func formatNumber(s string) (string, bool) {
	if isDecimalInteger(s) {
		if s == "-0" {
			return "0", true
		}
		return s, true // exact, even beyond float64 precision
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}

// isDecimalInteger reports whether s is an integer in JSON syntax, which has
// no leading zeros, so each integer has one spelling.
func isDecimalInteger(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
