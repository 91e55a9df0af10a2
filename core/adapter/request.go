package adapter

import (
	"context"
	"net/http"

	"github.com/ratekit/ratekit/core"
)

// HTTPRequest returns the [core.Request] view of a net/http request. Route is taken
// from r.Pattern, which http.ServeMux sets when it matched a pattern.
func HTTPRequest(r *http.Request) core.Request { return httpRequest{r} }

// HTTPRequestWithRoute is [HTTPRequest] with an explicit route pattern, for
// routers that report the pattern themselves (Gin's c.FullPath, Echo's
// c.Path).
func HTTPRequestWithRoute(r *http.Request, route string) core.Request {
	return httpRequestRoute{httpRequest{r}, route}
}

type httpRequest struct{ r *http.Request }

func (h httpRequest) Context() context.Context          { return h.r.Context() }
func (h httpRequest) Method() string                    { return h.r.Method }
func (h httpRequest) Path() string                      { return h.r.URL.Path }
func (h httpRequest) Route() string                     { return h.r.Pattern }
func (h httpRequest) Header(name string) string         { return h.r.Header.Get(name) }
func (h httpRequest) HeaderValues(name string) []string { return h.r.Header.Values(name) }
func (h httpRequest) Query(name string) string          { return h.r.URL.Query().Get(name) }
func (h httpRequest) RemoteAddr() string                { return h.r.RemoteAddr }
func (h httpRequestRoute) Route() string                { return h.route }

type httpRequestRoute struct {
	httpRequest
	route string
}
