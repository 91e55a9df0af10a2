package keyfuncs

import (
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"

	"github.com/ratekit/ratekit/core"
)

// MaxHeaderValueLen is the length, in bytes, of the longest header value that
// [Header] accepts, counting any whitespace around it.
const MaxHeaderValueLen = 256

var (
	errEmptyIdentity  = fmt.Errorf("keyfuncs: key function returned an empty identity: %w", core.ErrNoIdentity)
	errNoKeyFuncs     = fmt.Errorf("keyfuncs: no key functions: %w", core.ErrNoIdentity)
	errNoRoute        = fmt.Errorf("keyfuncs: no route pattern: %w", core.ErrNoIdentity)
	errNoHeader       = fmt.Errorf("keyfuncs: header missing or empty: %w", core.ErrNoIdentity)
	errHeaderTooLong  = fmt.Errorf("keyfuncs: header value longer than %d bytes: %w", MaxHeaderValueLen, core.ErrNoIdentity)
	joinEscapeReplace = strings.NewReplacer(`\`, `\\`, `|`, `\|`)
)

// First returns a key function whose identity is that of the first of fns
// that finds one, so the most specific identity available is limited:
//
//	keyfuncs.First(jwtUser, apiKey, clientIP)
//
// limits a signed-in user as the user, otherwise a client with an API key
// by the key, otherwise the client by its address. A function that returns
// an error wrapping [core.ErrNoIdentity], or an empty identity, is skipped;
// any other error is returned at once. When no function finds an identity,
// First returns the first function's error, which wraps
// [core.ErrNoIdentity].
//
// A nil function is a programming error: the returned function then always
// fails with an error that does not wrap [core.ErrNoIdentity].
func First(fns ...core.KeyFunc) core.KeyFunc {
	if containsNil(fns) {
		return func(core.Request) (string, error) { return "", errNilFunc }
	}
	if len(fns) == 0 {
		return func(core.Request) (string, error) { return "", errNoKeyFuncs }
	}
	fns = slices.Clone(fns)
	return func(r core.Request) (string, error) {
		var first error
		for _, f := range fns {
			id, err := f(r)
			if err == nil && id == "" {
				err = errEmptyIdentity
			}
			if err == nil {
				return id, nil
			}
			if !errors.Is(err, core.ErrNoIdentity) {
				return "", err
			}
			if first == nil {
				first = err
			}
		}
		return "", first
	}
}

// Join returns a key function whose identity combines the identities of
// all fns, separated by "|", so that a limit applies to each combination:
//
//	keyfuncs.Join(keyfuncs.Route(), clientIP)  // route:/login|ip:203.0.113.7
//	keyfuncs.Join(tenant, user)                // header:X-Tenant-Id:acme|user:42
//
// A "|" or "\" inside an identity is escaped with "\", so distinct
// combinations never produce the same identity. When any function finds no
// identity, or fails, Join returns its error.
//
// A nil function is a programming error: the returned function then always
// fails with an error that does not wrap [core.ErrNoIdentity].
func Join(fns ...core.KeyFunc) core.KeyFunc {
	if containsNil(fns) {
		return func(core.Request) (string, error) { return "", errNilFunc }
	}
	if len(fns) == 0 {
		return func(core.Request) (string, error) { return "", errNoKeyFuncs }
	}
	fns = slices.Clone(fns)
	return func(r core.Request) (string, error) {
		var b strings.Builder
		for i, f := range fns {
			id, err := f(r)
			if err != nil {
				return "", err
			}
			if id == "" {
				return "", errEmptyIdentity
			}
			if i > 0 {
				b.WriteByte('|')
			}
			if strings.ContainsAny(id, `\|`) {
				joinEscapeReplace.WriteString(&b, id)
			} else {
				b.WriteString(id)
			}
		}
		return b.String(), nil
	}
}

// Route returns a key function whose identity is the matched route pattern,
// such as "route:/users/{id}", so that each route has a limit of its own
// whatever the path's parameters. Join it with another function to limit
// each client per route. When the router reported no pattern, it yields an
// error wrapping [core.ErrNoIdentity]; it never falls back to the raw path,
// whose every variant ("/users/1", "/users/2", "/users//1") would otherwise
// be a fresh limit.
func Route() core.KeyFunc {
	return func(r core.Request) (string, error) {
		route := r.Route()
		if route == "" {
			return "", errNoRoute
		}
		return "route:" + route, nil
	}
}

// Header returns a key function whose identity is the value of the named
// header, surrounding whitespace trimmed: "header:X-Tenant-Id:acme". A
// request without the header, or with a value longer than
// [MaxHeaderValueLen], yields an error wrapping [core.ErrNoIdentity].
//
// Use it only for a header that a trusted gateway or an earlier middleware
// sets and that clients cannot: a client that chooses its own key is not
// limited. For API keys use [APIKey], which hashes them.
func Header(name string) (core.KeyFunc, error) {
	if !isToken(name) {
		return nil, fmt.Errorf("keyfuncs: invalid header name %q", name)
	}
	prefix := "header:" + textproto.CanonicalMIMEHeaderKey(name) + ":"
	return func(r core.Request) (string, error) {
		v := r.Header(name)
		if len(v) > MaxHeaderValueLen {
			return "", errHeaderTooLong
		}
		if v = trimOWS(v); v == "" {
			return "", errNoHeader
		}
		return prefix + v, nil
	}, nil
}

// Static returns a key function whose identity is always "static:" + s, for
// a limit that all requests share, such as a global ceiling in front of a
// fragile backend.
func Static(s string) core.KeyFunc {
	id := "static:" + s
	return func(core.Request) (string, error) { return id, nil }
}

func containsNil(fns []core.KeyFunc) bool {
	for _, f := range fns {
		if f == nil {
			return true
		}
	}
	return false
}
