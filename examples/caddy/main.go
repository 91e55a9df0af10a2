// Command caddy is Caddy with its standard modules and ratekit's native
// module, http.handlers.ratekit (the ratekit Caddyfile directive):
//
//	go build        # in this folder: a caddy binary
//	ADDR=127.0.0.1:8080 REDIS_URL=redis://127.0.0.1:6379 LIMIT=5 \
//		./caddy run --config Caddyfile --adapter caddyfile
//
// Caddyfile limits every client IP to LIMIT requests per minute on every
// path but /healthz, and answers "ok"; gateway.Caddyfile puts the same
// limits in front of an upstream, with a second rule on /strict and a
// problem+json 429 from handle_errors. The rest of the binary is Caddy's
// own command line (caddy help).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/ratekit/ratekit/caddyratekit"
)

func main() { caddycmd.Main() }
