#!/usr/bin/env bash
# Runs the end-to-end benchmark (bench/cmd/e2e): wrk against each example
# app (as it ships, batching on, and with -batch=false) on a redis-server of its own, and
# against a baseline app of the same framework that makes one bare script
# call per request; every process on loopback, each stopped by its pid at
# the end. It writes its results
# between the lines <!-- e2e:begin --> and <!-- e2e:end --> of
# docs/benchmarks.md and leaves the rest of the file alone; bench/run.sh,
# which rewrites the rest, carries that section over.
#
#   bench/e2e.sh                                    # 3 rounds of 10s runs: about 7 minutes
#   ROUNDS=5 DURATION=20s bench/e2e.sh              # longer, steadier
#   THREADS=4 CONNECTIONS=128 bench/e2e.sh
#   BENCH_NOTE="8 dedicated cores" bench/e2e.sh
#   bench/e2e.sh -frameworks gin,fiber              # extra flags go to cmd/e2e
#
# It installs wrk (Debian's package) with apt-get when it is missing, and
# needs redis-server on PATH.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v wrk >/dev/null 2>&1; then
  echo "wrk not found: installing Debian's package" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  if ! "${sudo[@]}" apt-get install -y wrk; then
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y wrk
  fi
fi

rounds="${ROUNDS:-3}"
duration="${DURATION:-10s}"
threads="${THREADS:-2}"
connections="${CONNECTIONS:-64}"
note="${BENCH_NOTE:-$(nproc) CPUs, possibly shared with other work.}"
args=(-rounds "$rounds" -duration "$duration" -threads "$threads" -connections "$connections" "$@")

go run ./cmd/e2e "${args[@]}" \
  -cmdline "bench/e2e.sh, which runs: go run ./cmd/e2e ${args[*]}" \
  -note "$note" -out ../docs/benchmarks.md
