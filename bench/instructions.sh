#!/usr/bin/env bash
# Counts the instructions that one call of a function costs in a Go
# benchmark, by Valgrind's callgrind: a measure that a busy machine does
# not move, where wall and CPU time on a shared machine swing by more than
# the few percent a change is held to. Only instructions executed inside
# FUNC (and what it calls, on its goroutine) are counted; the sum is
# divided by the calls a benchmark of N iterations makes of it (N + 1:
# the testing package runs each benchmark once before the N).
#
#   bench/instructions.sh PKG BENCH FUNC [N] [REPS]
#
# PKG is a package directory, BENCH a -bench pattern naming one
# sub-benchmark each (run once per pattern: give several as separate
# words in quotes), FUNC the function as callgrind names it (a glob), N
# the iterations (60000), REPS the runs per pattern (3). The figures
# assume that FUNC is called once per iteration. Example, the live page's
# Recorder (a pair per store and goroutine count, without and with it):
#
#   bench/instructions.sh ./livepage \
#     'BenchmarkLimiter/memory/g=1/none$ BenchmarkLimiter/memory/g=1/recorder$' \
#     '*core.(*Limiter).CheckInto'
#
# The benchmark runs with GOGC=off, so that no garbage collection cycle
# lands in one run and not in another (N iterations must fit in memory),
# and with asynchronous preemption off, whose signals callgrind cannot
# follow. Callgrind still stops at times on a signal of the Go runtime
# ("Assertion 'sigNum == vgCallgrind_current_state.sig' failed"); such a
# run is retried, up to 10 times. Needs valgrind (Debian's package).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,28p' "$0"; exit 2; }
pkg=$1 benches=$2 fn=$3 n=${4:-60000} reps=${5:-3}
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
bin=$(mktemp -d)/bench.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
# without cgo: callgrind follows the Go runtime's own threads better
CGO_ENABLED=0 go test -c -o "$bin" "$pkg"
for b in $benches; do
  for rep in $(seq "$reps"); do
    count=''
    for _ in $(seq 10); do
      count=$(cd "$pkg" && GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null "--toggle-collect=$fn" "$bin" -test.run '^$' \
        -test.bench "$b" -test.benchtime "${n}x" 2>&1 | awk '/Collected :/ {print $4}' || true)
      [ -n "$count" ] && break
    done
    [ -n "$count" ] || { echo "$b: callgrind failed 10 times" >&2; exit 1; }
    echo "$b run $rep: $((count / (n + 1))) instructions per call"
  done
done
