#!/usr/bin/env bash
# Measures what each ratekit algorithm costs Redis per decision (unbatched,
# batched and, for GCRA, leasing; the outbound reservation; ratekit-server's
# gRPC path, the server built from this tree and run as a process; on
# 100,000 keys and on one hot key) and
# writes docs/capacity.md: the measurements, and from them the masters a
# rate needs, a hot key's cap, leasing's lift and overshoot, and a fleet's
# network. It starts and stops its own redis-server (which must be on PATH).
# The whole file is generated: hand edits are lost.
#
#   bench/capacity.sh                          # 3 rounds of 200,000 decisions a case: a few minutes
#   ROUNDS=5 DECISIONS=500000 bench/capacity.sh
#   HEADROOM=0.7 bench/capacity.sh             # plan masters at 70% CPU
#   BENCH_NOTE="8 dedicated cores" bench/capacity.sh
#   bench/capacity.sh -goroutines 128          # extra flags go to cmd/capacity
#
# BENCH_NOTE describes the machine in the report. Run it on a quiet
# machine: the client and Redis share its CPUs.
set -euo pipefail
cd "$(dirname "$0")"

rounds="${ROUNDS:-3}"
decisions="${DECISIONS:-200000}"
headroom="${HEADROOM:-0.5}"
note="${BENCH_NOTE:-$(nproc) CPUs, possibly shared with other work.}"
out=../docs/capacity.md
args=(-rounds "$rounds" -decisions "$decisions" -headroom "$headroom" "$@")

go run ./cmd/capacity "${args[@]}" \
  -cmdline "bench/capacity.sh   # runs, from bench/: go run ./cmd/capacity ${args[*]}" \
  -note "$note" -out "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote docs/capacity.md" >&2
