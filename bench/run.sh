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
set -euo pipefail
cd "$(dirname "$0")"

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
