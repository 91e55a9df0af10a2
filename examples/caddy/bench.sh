#!/usr/bin/env bash
# Benchmarks Caddy alone against Caddy with ratekit's module: wrk against
# Caddy processes built from this folder, on loopback, with one
# redis-server of its own, every process stopped by its pid at the end.
# It prints a Markdown table of requests/s and p99 latency, each as a
# ratio to Caddy alone in the same round (the median of the rounds' ratios,
# the lowest and highest in brackets), and the CPU time each request cost
# the Caddy process under test and redis-server (for the proxy cases, not
# the upstream's). The proxy cases are compared with proxy, the others
# with caddy.
#
#   examples/caddy/bench.sh                         # 3 rounds of 10s runs: about 5 minutes
#   ROUNDS=5 DURATION=20s examples/caddy/bench.sh
#   THREADS=2 CONNECTIONS=64 examples/caddy/bench.sh
#
# Cases (every request allowed unless said otherwise):
#   caddy             respond "ok", no limiter
#   ratekit           ratekit in front of respond "ok": one rule, GCRA,
#                     keyed by client IP (wrk is one client: one hot key)
#   ratekit-lease     the same with lease (hot-key leasing: a bounded
#                     overshoot for one Redis call per lease)
#   ratekit-10k-keys  the same as ratekit keyed by a header that cycles through 10,000
#                     values (a wrk script)
#   ratekit-denied    every request over its limit: answered 429 from
#                     the denied-key cache, without Redis
#   proxy             reverse_proxy to an upstream (a Caddy answering "ok")
#   ratekit-proxy     ratekit in front of that reverse_proxy
#
# With CADDY_RATELIMIT=<path>, a caddy binary that has the module
# github.com/mholt/caddy-ratelimit (built by you: it is not on the Go module
# proxy that this repository uses), it also runs
#   caddy-ratelimit   caddy-ratelimit's rate_limit in front of respond "ok",
#                     keyed by {remote_host}, in one instance's memory
#
# It installs wrk (Debian's package) with apt-get when it is missing, and
# needs redis-server and go on PATH.
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
cases=(caddy ratekit ratekit-lease ratekit-10k-keys ratekit-denied proxy ratekit-proxy)

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { # a free loopback port
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    shuf -i 20000-60000 -n 1
}

echo "--- building ./caddy" >&2
start=$(date +%s)
go build -o "$work/caddy" .
echo "built in $(( $(date +%s) - start ))s" >&2

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
redis_pid=$!
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done

declare -A port pid
export HOME="$work" XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config"

# site NAME BODY: starts a Caddy serving BODY on a port of its own
site() {
  local name=$1 body=$2
  port[$name]=$(free_port)
  cat >"$work/$name.Caddyfile" <<EOF
{
	admin off
}
http://127.0.0.1:${port[$name]} {
	bind 127.0.0.1
$body
}
EOF
  "$work/caddy" run --config "$work/$name.Caddyfile" --adapter caddyfile >"$work/$name.log" 2>&1 &
  pids+=($!)
  pid[$name]=$!
  for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:${port[$name]}/" && return; sleep 0.05; done
  echo "caddy $name did not start:" >&2; cat "$work/$name.log" >&2; exit 1
}

redis="redis redis://127.0.0.1:$redis_port"
site caddy '	respond "ok"'
site ratekit "	ratekit {
		$redis
		rule default 50000000 1h
	}
	respond \"ok\""
site ratekit-lease "	ratekit {
		$redis
		lease
		rule default 50000000 1h
	}
	respond \"ok\""
site ratekit-10k-keys "	ratekit {
		$redis
		rule default 50000000 1h {
			key header X-Client
		}
	}
	respond \"ok\""
site ratekit-denied "	ratekit {
		$redis
		rule default 1 1h
	}
	respond \"ok\""
site proxy "	reverse_proxy 127.0.0.1:${port[caddy]}"
site ratekit-proxy "	ratekit {
		$redis
		rule default 50000000 1h
	}
	reverse_proxy 127.0.0.1:${port[caddy]}"

if [ -n "${CADDY_RATELIMIT:-}" ]; then
  cases+=(caddy-ratelimit)
  cp "$CADDY_RATELIMIT" "$work/caddy-ratelimit"
  port[caddy-ratelimit]=$(free_port)
  cat >"$work/caddy-ratelimit.Caddyfile" <<EOF
{
	admin off
	order rate_limit before respond
}
http://127.0.0.1:${port[caddy-ratelimit]} {
	bind 127.0.0.1
	rate_limit {
		zone default {
			key {remote_host}
			events 1000000
			window 1s
		}
	}
	respond "ok"
}
EOF
  "$work/caddy-ratelimit" run --config "$work/caddy-ratelimit.Caddyfile" --adapter caddyfile >"$work/caddy-ratelimit.log" 2>&1 &
  pids+=($!)
  pid[caddy-ratelimit]=$!
  for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:${port[caddy-ratelimit]}/" && break; sleep 0.05; done
fi

cat >"$work/keys.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/", {["X-Client"] = tostring(n % 10000)})
end
EOF

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# run CASE ROUND: one wrk run; appends "case round rps p99_us caddy_us redis_us non2xx" to results
run() {
  local name=$1 round=$2 script=()
  [ "$name" = ratekit-10k-keys ] && script=(-s "$work/keys.lua")
  local c0 r0 c1 r1
  c0=$(ticks "${pid[$name]}"); r0=$(ticks "$redis_pid")
  wrk -t"$threads" -c"$connections" -d"$duration" --latency "${script[@]}" "http://127.0.0.1:${port[$name]}/" >"$work/wrk.out"
  c1=$(ticks "${pid[$name]}"); r1=$(ticks "$redis_pid")
  awk -v name="$name" -v round="$round" -v dc=$((c1 - c0)) -v dr=$((r1 - r0)) -v hz="$hz" '
    function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; if (v ~ /s$/) return v * 1e6; return v }
    / 99%/ { p99 = us($2) }
    /requests in/ { n = $1 }
    /Non-2xx/ { non2xx = $NF }
    /Requests\/sec/ { rps = $2 }
    END { printf "%s %d %.0f %.0f %.1f %.1f %d\n", name, round, rps, p99, dc * 1e6 / hz / n, dr * 1e6 / hz / n, non2xx + 0 }
  ' "$work/wrk.out" >>"$work/results"
  echo "round $round $name: $(tail -1 "$work/results")" >&2
}

began=$(date -u '+%Y-%m-%d %H:%M UTC')
start=$(date +%s)
# warm up every case, then run the rounds, each case once per round
for name in "${cases[@]}"; do
  wrk -t1 -c8 -d1s "http://127.0.0.1:${port[$name]}/" >/dev/null
done
: >"$work/results"
for round in $(seq "$rounds"); do
  for name in "${cases[@]}"; do run "$name" "$round"; done
done
took=$(( $(date +%s) - start ))

echo "Command: \`ROUNDS=$rounds DURATION=$duration THREADS=$threads CONNECTIONS=$connections examples/caddy/bench.sh\`. Run on $began; it took ${took}s."
echo
echo "Machine: $(uname -sm), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); $(go version | cut -d' ' -f3); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(redis-server --version | cut -d' ' -f1-3). wrk, Caddy and redis-server share the CPUs."
echo
echo "| case | req/s | ÷ caddy alone | p99 | ÷ caddy alone | Caddy CPU µs/req | redis CPU µs/req | non-2xx |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk -v cases="${cases[*]}" '
  { rps[$1, $2] = $3; p99[$1, $2] = $4; cpu[$1, $2] = $5; rcpu[$1, $2] = $6; bad[$1, $2] = $7; if ($2 > rounds) rounds = $2 }
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function lo(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
  function hi(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
  END {
    n = split(cases, cs, " ")
    for (k = 1; k <= n; k++) {
      c = cs[k]; b = (c ~ /proxy$/) ? "proxy" : "caddy"
      for (r = 1; r <= rounds; r++) { a1[r] = rps[c, r]; a2[r] = rps[c, r] / rps[b, r]; a3[r] = p99[c, r]; a4[r] = p99[c, r] / p99[b, r]; a5[r] = cpu[c, r]; a6[r] = rcpu[c, r]; a7[r] = bad[c, r] }
      mr = median(a1, rounds); l2 = lo(a2, rounds); h2 = hi(a2, rounds); m2 = median(a2, rounds)
      mp = median(a3, rounds); l4 = lo(a4, rounds); h4 = hi(a4, rounds); m4 = median(a4, rounds)
      label = (c == b) ? "1" : sprintf("%.2f× (%.2f–%.2f)", m2, l2, h2)
      plabel = (c == b) ? "1" : sprintf("%.2f× (%.2f–%.2f)", m4, l4, h4)
      if (c ~ /proxy$/ && c != b) { label = label " of proxy"; plabel = plabel " of proxy" }
      printf "| %s | %d | %s | %.2fms | %s | %.1f | %.1f | %d |\n", c, mr, label, mp / 1000, plabel, median(a5, rounds), median(a6, rounds), median(a7, rounds)
    }
  }' "$work/results"
