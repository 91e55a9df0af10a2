#!/usr/bin/env bash
# CI for the comparison module: vet, staticcheck (when installed), unit
# tests, then one quick run of the comparison against its own redis-server.
# The quick run checks that every contender works and that the fixture
# holds; it asserts no timings.
set -euo pipefail
cd "$(dirname "$0")"

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
