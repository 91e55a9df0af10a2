#!/usr/bin/env bash
# CI for ratekit-server's two modules (each with a go.mod of its own):
# build, vet and staticcheck (when installed), then the tests with the
# race detector: the server's own (real redis-server processes: outages,
# a Cluster and Sentinel failover, exactness across server processes), and
# the comparison with envoyproxy/ratelimit, whose binaries the tests build
# from the Go module proxy (a cached Go build, under a minute cold).
set -euo pipefail
cd "$(dirname "$0")"
staticcheck="$(go env GOPATH)/bin/staticcheck"
for mod in . envoytest; do
  echo "--- ratekit-server ($mod): go build, go vet"
  (cd "$mod" && go build ./... && go vet ./...)
  if [ -x "$staticcheck" ]; then
    echo "--- ratekit-server ($mod): staticcheck"
    (cd "$mod" && "$staticcheck" ./...)
  fi
done
echo "--- ratekit-server: go test -race"
go test -race -shuffle=on -count=1 -timeout 10m ./...
echo "--- ratekit-server: comparison with envoyproxy/ratelimit"
(cd envoytest && go test -race -count=1 -timeout 10m ./...)
