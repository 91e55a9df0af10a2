package core

import (
	"context"
	"errors"
)

// ErrNoIdentity is returned (possibly wrapped) by a [KeyFunc] that finds no
// identity in a request: no valid token, no API key, no usable address.
// Chains such as keyfuncs.First move on to their next function when they see
// it; adapters answer it with the next extractor or 401, as configured.
var ErrNoIdentity = errors.New("ratekit: no identity in request")

// Request is the framework-neutral view of an HTTP request that key, cost and
// skip functions read. Each adapter implements it over its framework's own
// request without converting it to net/http.
//
// Strings returned by a Request may be backed by buffers that the framework
// reuses once the handler returns; a function that keeps one must copy it.
type Request interface {
	// Context returns the request's context; it is the context that reaches
	// the store.
	Context() context.Context
	// Method returns the HTTP method, such as "GET".
	Method() string
	// Path returns the raw URL path, such as "/users/42".
	Path() string
	// Route returns the matched route pattern, such as "/users/{id}" or
	// "/users/:id", or "" when the router did not report one.
	Route() string
	// Header returns the first value of the named header, or "".
	Header(name string) string
	// HeaderValues returns every value of the named header, one element per
	// header line, in the order received.
	HeaderValues(name string) []string
	// Query returns the first value of the named query parameter, or "".
	Query(name string) string
	// RemoteAddr returns the socket peer's address as "host:port" or "host".
	RemoteAddr() string
}

// KeyFunc extracts the identity that a rule limits, such as "ip:203.0.113.7"
// or "user:42". It returns an error wrapping [ErrNoIdentity] when the request
// carries no identity of its kind.
type KeyFunc func(Request) (string, error)
