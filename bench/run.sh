#!/usr/bin/env bash
# Runs the comparison benchmark (bench/cmd/compare) in full and writes its
# report to docs/benchmarks.md. It starts and stops its own redis-server.
# After the direct pass it runs a second, shorter one (3 rounds, fewer
# contenders) through an in-process proxy that adds LATENCY (250us by
# default) each way between the client and redis-server; LATENCY=0 skips it.
#
#   bench/run.sh                         # 7 rounds of 500ms runs: about 13 minutes
#   ROUNDS=9 DURATION=2s bench/run.sh    # longer, steadier
#   BENCH_NOTE="8 dedicated cores" bench/run.sh
#
# BENCH_NOTE describes the machine in the report. The figures are only
# comparable within one run; the report's ratios are what to quote.
#
# The end-to-end section of docs/benchmarks.md (between the lines
# <!-- e2e:begin --> and <!-- e2e:end -->) belongs to bench/e2e.sh: this
# script carries it over unchanged (-keep).
#
# The comparison measures the server's ceiling with redis-benchmark, a C
# client: it installs Debian's redis-tools with apt-get when redis-benchmark
# is missing (without it, the ceiling is left out of the report).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-benchmark >/dev/null 2>&1; then
  echo "redis-benchmark not found: installing Debian's redis-tools" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  if ! "${sudo[@]}" apt-get install -y redis-tools; then
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y redis-tools
  fi
fi

rounds="${ROUNDS:-7}"
duration="${DURATION:-500ms}"
latency="${LATENCY:-250us}"
note="${BENCH_NOTE:-$(nproc) CPUs, possibly shared with other work.}"
out=../docs/benchmarks.md
args=(-rounds "$rounds" -duration "$duration" -latency "$latency" "$@")

go run ./cmd/compare "${args[@]}" \
  -cmdline "bench/run.sh, which runs: go run ./cmd/compare ${args[*]}" \
  -note "$note" -keep "$out" -out "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote docs/benchmarks.md" >&2
