// Package caddyratekit is ratekit's native Caddy module,
// http.handlers.ratekit: an HTTP handler that limits requests with a
// core.Limiter over Redis (package redisstore), so that any number of Caddy
// instances sharing one Redis hold one exact limit, with no service in
// between.
//
// Build a Caddy with it by importing this package for its side effect, as
// examples/caddy does, or with xcaddy:
//
//	xcaddy build --with github.com/ratekit/ratekit/caddyratekit
//
// In a Caddyfile the directive is ratekit; it is ordered before basic_auth
// by default, so that credentials are never checked for a client over its
// limit (use the global order option or a route block to place it
// elsewhere):
//
//	example.com {
//		@limited not path /healthz
//		ratekit @limited {
//			redis {$REDIS_URL}
//			rule default 100 1m
//		}
//		reverse_proxy 127.0.0.1:9000
//	}
//
// A denied request is an error of the route (caddyhttp.Error with status
// 429, or 503 when the store is down and the limiter fails closed), so
// that handle_errors can shape the answer; the rate-limit header fields and
// Retry-After are already set. The decision is available to later handlers
// and to handle_errors as placeholders: {http.ratekit.allowed},
// {http.ratekit.remaining}, {http.ratekit.limit}, {http.ratekit.reset},
// {http.ratekit.retry_after}, {http.ratekit.rule} and
// {http.ratekit.degraded}.
//
// The Redis client and the Limiter are shared, by their configuration,
// across the handlers of a config and across config reloads (reference
// counted in a caddy.UsagePool), and closed when the last handler using
// them is cleaned up: a reload keeps Redis's connections and the
// Limiter's local state, and leaks neither.
//
// docs/gateways-caddy.md in the repository documents every option.
package caddyratekit
