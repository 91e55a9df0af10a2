package caddyratekit

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// request is the core.Request view of a request in Caddy's handler chain.
// It is one pointer, so that it fits an interface without allocating.
type request struct{ r *http.Request }

func (q request) Context() context.Context          { return q.r.Context() }
func (q request) Method() string                    { return q.r.Method }
func (q request) Path() string                      { return q.r.URL.Path }
func (q request) Route() string                     { return "" } // Caddy's routes have no patterns
func (q request) Header(name string) string         { return q.r.Header.Get(name) }
func (q request) HeaderValues(name string) []string { return q.r.Header.Values(name) }
func (q request) Query(name string) string          { return q.r.URL.Query().Get(name) }

// RemoteAddr returns the client's address as Caddy determined it for the
// request (the client_ip variable, {client_ip}): the socket peer, or, when
// the peer is one of the server's trusted_proxies, the address its
// client_ip_headers name, walked as trusted_proxies_strict says. So the IP
// key function, built without trusted proxies of its own, limits the
// client Caddy sees, and never reads X-Forwarded-For itself. Outside a
// Caddy server (no such variable) it is the socket peer's address.
func (q request) RemoteAddr() string {
	if ip, ok := caddyhttp.GetVar(q.r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return q.r.RemoteAddr
}
