package grpclimit

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// request is the core.Request view of a gRPC call.
type request struct {
	ctx    context.Context
	method string // the full method name, "/pkg.Service/Method"
}

func (r request) Context() context.Context { return r.ctx }

// Method returns "POST": every gRPC call is an HTTP/2 POST.
func (r request) Method() string { return "POST" }

func (r request) Path() string  { return r.method }
func (r request) Route() string { return r.method }

// Header returns the first value of the named metadata key, matched
// case-insensitively.
func (r request) Header(name string) string {
	if v := metadata.ValueFromIncomingContext(r.ctx, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// HeaderValues returns every value of the named metadata key, matched
// case-insensitively.
func (r request) HeaderValues(name string) []string {
	return metadata.ValueFromIncomingContext(r.ctx, name)
}

// Query returns "": a gRPC call has no query string.
func (r request) Query(string) string { return "" }

// RemoteAddr returns the peer's address, or "" when the context holds no
// peer.
func (r request) RemoteAddr() string {
	if p, ok := peer.FromContext(r.ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
