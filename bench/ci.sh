#!/usr/bin/env bash
# CI for the comparison module: vet, staticcheck (when installed), unit
# tests, then one quick run of the comparison against its own redis-server.
# The quick run checks that every contender works and that the fixture
# holds; it asserts no timings. The end-to-end benchmark (bench/e2e.sh)
# needs wrk and minutes of quiet CPUs, so CI only builds it and the
# baseline apps and runs its unit tests (wrk's report parsing, the
# section writer, the probes' checks); it never installs or runs wrk.
set -euo pipefail
cd "$(dirname "$0")"

echo "--- bench: go build"
go build ./...
echo "--- bench: go vet"
go vet ./...
staticcheck="$(go env GOPATH)/bin/staticcheck"
if [ -x "$staticcheck" ]; then
  echo "--- bench: staticcheck"
  "$staticcheck" ./...
fi
echo "--- bench: go test"
go test -count=1 ./...
echo "--- bench: quick comparison (no timings asserted)"
go run ./cmd/compare -quick -out /dev/null
go run ./cmd/capacity -quick -out /dev/null
