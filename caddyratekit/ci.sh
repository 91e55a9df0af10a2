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
began=$(date +%s)
step_began=$began
took() { # prints how long the step that just ended took
  local now; now=$(date +%s)
  echo "    ($(( now - step_began ))s)"
  step_began=$now
}

for mod in caddyratekit examples/caddy; do
  echo "--- $mod: go mod tidy -diff, build, vet"
  (cd "$mod" && go mod tidy -diff && go build ./... && go vet ./...)
  took
  if [ -x "$staticcheck" ]; then
    echo "--- $mod: staticcheck"
    (cd "$mod" && "$staticcheck" ./...)
    took
  fi
done

echo "--- caddyratekit: go test -race"
(cd caddyratekit && go test -race -shuffle=on -count=1 -timeout 10m ./...)
took

echo "--- examples/caddy: go test (the built caddy, as processes)"
(cd examples/caddy && go test -count=1 -timeout 10m -v ./...) | grep -E '^(---|=== RUN|ok|FAIL|PASS|panic)|_test\.go:'
took
echo "--- caddyratekit/ci.sh took $(( $(date +%s) - began ))s"
