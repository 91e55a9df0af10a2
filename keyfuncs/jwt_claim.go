package keyfuncs

import (
	"crypto"
	"errors"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
)

// JWTClaim returns a function that reads the top-level claim named claim of
// a request's bearer token, once the token is verified exactly as [JWT]
// verifies it (keyFunc, [Algorithms], [Leeway], [Issuer], [Audience],
// [ExpirationOptional] mean the same). Its use is a per-request choice
// that the token's issuer makes, such as the caller's plan for
// [PlanLimits]:
//
//	plan, err := keyfuncs.JWTClaimHMAC(secret, "plan")
//	limitOf, err := keyfuncs.PlanLimits(plan, map[string]core.Limit{"pro": core.PerMinute(100)})
//
// The function returns the claim's value when it is a non-empty string,
// and "" otherwise: no token, a token that fails verification (forged,
// unsigned, expired, longer than [MaxTokenLen]), a token without the
// claim, or a claim of another type (a number, a list, an object). A
// client therefore cannot pick its own plan: an unverified token reads as
// a token without one, which [PlanLimits] answers with the rule's
// default limit.
//
// Each call verifies the token, as the key function of [JWT] does: a rule
// keyed by the token's user whose limit is its plan verifies it twice per
// request, some 10 µs and 60 allocations each with HS256
// (BenchmarkJWTClaim).
//
// claim must not be empty; the [Claim] option, which names the user claim
// of [JWT], is refused.
func JWTClaim(keyFunc jwt.Keyfunc, claim string, opts ...JWTOption) (func(core.Request) string, error) {
	v, err := newVerifier(keyFunc, opts)
	return v.claimReader(claim, err)
}

// JWTClaimHMAC is [JWTClaim] for tokens signed with a shared secret, with
// the algorithms of [JWTHMAC].
func JWTClaimHMAC(secret []byte, claim string, opts ...JWTOption) (func(core.Request) string, error) {
	v, err := newHMACVerifier(secret, opts)
	return v.claimReader(claim, err)
}

// JWTClaimPublicKey is [JWTClaim] for tokens signed with the private key of
// key, with the keys and algorithms of [JWTPublicKey].
func JWTClaimPublicKey(key crypto.PublicKey, claim string, opts ...JWTOption) (func(core.Request) string, error) {
	v, err := newPublicKeyVerifier(key, opts)
	return v.claimReader(claim, err)
}

// claimReader returns the reader of claim of v's verified tokens, or err,
// the error of making v.
func (v *verifier) claimReader(claim string, err error) (func(core.Request) string, error) {
	switch {
	case err != nil:
		return nil, err
	case claim == "":
		return nil, errors.New("keyfuncs: empty claim name")
	case v.claimSet:
		return nil, errors.New("keyfuncs: the Claim option names the user claim of JWT; a claim reader takes its claim as an argument")
	}
	return func(r core.Request) string {
		claims, err := v.verify(r)
		if err != nil {
			return ""
		}
		s, _ := claims[claim].(string)
		return s
	}, nil
}
