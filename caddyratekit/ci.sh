#!/usr/bin/env bash
# CI for the Caddy module (caddyratekit/) and the Caddy it builds
# (examples/caddy/), two modules of their own: tidy go.mod files, build,
# vet, staticcheck (when installed), the module's tests under the race
# detector, then the example's tests, which build its caddy binary and run
# it as processes (two instances on one redis-server, Redis killed and
# stalled, reloads under traffic). Those run without -race: the module's
# code is raced above, and a race build of Caddy's whole tree for the test
# binary would take minutes more. Most of the time goes into compiling
# Caddy's tree, once per build mode; the build cache keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
staticcheck="$(go env GOPATH)/bin/staticcheck"

for mod in caddyratekit examples/caddy; do
  echo "--- $mod: go mod tidy -diff, build, vet"
  (cd "$mod" && go mod tidy -diff && go build ./... && go vet ./...)
  if [ -x "$staticcheck" ]; then
    echo "--- $mod: staticcheck"
    (cd "$mod" && "$staticcheck" ./...)
  fi
done

echo "--- caddyratekit: go test -race"
(cd caddyratekit && go test -race -shuffle=on -count=1 -timeout 10m ./...)

echo "--- examples/caddy: go test (the built caddy, as processes)"
(cd examples/caddy && go test -count=1 -timeout 10m -v ./...) | grep -E '^(---|=== RUN|ok|FAIL|PASS|panic)|_test\.go:'
