package main

import (
	"fmt"
	"github.com/ratekit/ratekit/bench/internal/proccpu"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratekit/bench/internal/figures"
	"github.com/ratekit/ratekit/bench/internal/mdsection"
)

type report struct {
	opts              options
	started, finished time.Time
	wrkVersion        string
	redisVersion      string
	results           []*frameworkResult
}

// appSummary is one app's runs reduced to medians.
type appSummary struct {
	perSecond       float64
	p50, p99        time.Duration
	callsPerRequest float64
	// medians of CPU time per request of the app, redis-server and wrk,
	// and of Redis's time per script call
	appCPU, redisCPU, wrkCPU, scriptCall time.Duration
}

type frameworkSummary struct {
	example, batched, baseline appSummary
	// each example app's requests/s over the baseline's
	exampleVs, batchedVs ratioSummary
}

// ratioSummary is an app's requests/s over the baseline's: ratios has one
// per round, ratio is their median, low and high the extremes.
type ratioSummary struct {
	ratio, low, high float64
	ratios           []float64
}

func ratios(app, baseline []run) ratioSummary {
	var s ratioSummary
	for i := range min(len(app), len(baseline)) {
		s.ratios = append(s.ratios, app[i].wrk.perSecond/baseline[i].wrk.perSecond)
	}
	if len(s.ratios) > 0 {
		s.ratio = figures.Median(slices.Clone(s.ratios))
		s.low, s.high = slices.Min(s.ratios), slices.Max(s.ratios)
	}
	return s
}

func summarize(runs []run) appSummary {
	var ps, p50, p99, calls, app, rds, wrk, script []float64
	for _, r := range runs {
		ps = append(ps, r.wrk.perSecond)
		p50 = append(p50, float64(r.wrk.p50))
		p99 = append(p99, float64(r.wrk.p99))
		calls = append(calls, r.callsPerRequest())
		app = append(app, float64(r.perRequest(r.appCPU)))
		rds = append(rds, float64(r.perRequest(r.redisCPU)))
		wrk = append(wrk, float64(r.perRequest(r.wrk.cpu)))
		script = append(script, float64(r.perScriptCall()))
	}
	return appSummary{
		perSecond: figures.Median(ps), p50: time.Duration(figures.Median(p50)), p99: time.Duration(figures.Median(p99)),
		callsPerRequest: figures.Median(calls),
		appCPU:          time.Duration(figures.Median(app)), redisCPU: time.Duration(figures.Median(rds)),
		wrkCPU: time.Duration(figures.Median(wrk)), scriptCall: time.Duration(figures.Median(script)),
	}
}

// micros formats d in microseconds with one decimal.
func micros(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}

func (r *frameworkResult) summary() frameworkSummary {
	return frameworkSummary{
		example: summarize(r.example), batched: summarize(r.batched), baseline: summarize(r.baseline),
		exampleVs: ratios(r.example, r.baseline), batchedVs: ratios(r.batched, r.baseline),
	}
}

// markdown renders the end-to-end section, markers included.
func (rep *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	o := rep.opts
	p("%s", mdsection.Begin)
	p("## End to end: the example apps under wrk")
	p("")
	p("<!-- Written by bench/e2e.sh (bench/cmd/e2e), which replaces only this section; bench/run.sh keeps it. -->")
	p("")
	p("Command: `%s`, from `bench/`. Run on %s; it took %v.", o.cmdline,
		rep.started.UTC().Format("2006-01-02 15:04 MST"), rep.finished.Sub(rep.started).Round(time.Second))
	p("")
	machine := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if m := proccpu.Model(); m != "" {
		machine += ", " + m
	}
	p("Machine: %s; %s; %s; redis-server %s. wrk, the app under test and redis-server share the CPUs.",
		machine, runtime.Version(), rep.wrkVersion, rep.redisVersion)
	if o.note != "" {
		p("%s", o.note)
	}
	p("")
	p("Each example app (`examples/<framework>`, ratekit's middleware in front of `GET /`) as it ships")
	p("(`as shipped`: batching on, so the Redis calls of concurrent requests share pipelined round trips,")
	p("and those of one limit one script call) and with `-batch=false` (one Redis call per request), against a")
	p("baseline app of the same framework (`bench/baseline/<framework>`): the same router set-up, routes")
	p("and body, but its `GET /` handler makes one bare script call per request, `local c =")
	p("redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c` by `redis.NewScript(...).Run`,")
	p("keyed by the client's IP, through a go-redis client configured as the example apps' (URL defaults,")
	p("`ContextTimeoutEnabled`, `MaxRetries: -1`, `DialerRetries: 1`). The bar, for the app as it ships:")
	p("requests/s at least **%.1f×** its baseline's, and a p99 latency no worse than the baseline's.", o.minRatio)
	p("")
	p("| framework | app | req/s | baseline req/s | ÷ baseline | p50 / p99 | baseline p50 / p99 | meets the bar |")
	p("|---|---|---:|---:|---:|---:|---:|:---:|")
	for _, r := range rep.results {
		s := r.summary()
		for _, x := range []struct {
			name    string
			app     appSummary
			vs      ratioSummary
			shipped bool
		}{{shippedName, s.batched, s.batchedVs, true}, {unbatchedName, s.example, s.exampleVs, false}} {
			ok := "–" // the bar is the shipped app's
			if x.shipped {
				ok = "yes"
				if !meetsBar(s, o.minRatio) {
					ok = "**no**"
				}
			}
			p("| %s | %s | %s | %s | %.2f× (%.2f–%.2f) | %s / %s | %s / %s | %s |", r.fw, x.name,
				figures.Thousands(x.app.perSecond), figures.Thousands(s.baseline.perSecond), x.vs.ratio, x.vs.low, x.vs.high,
				figures.Dur(x.app.p50), figures.Dur(x.app.p99), figures.Dur(s.baseline.p50), figures.Dur(s.baseline.p99), ok)
		}
	}
	p("")
	p("Figures are medians over %d rounds; the ratio is the median of the per-round ratios, with the", o.rounds)
	p("lowest and highest in brackets: how far the machine's noise moved it. Absolute figures depend on")
	p("the machine and on whatever else it was doing; quote the ratios.")
	p("")
	p("### Where the CPU goes")
	p("")
	p("CPU time per request (user + system, from `/proc/<pid>/stat` around each run, so 10 ms ticks over")
	p("the run) of the app, of redis-server and of wrk, and the time Redis spent per script call (`usec`")
	p("over `calls` of `INFO commandstats`); medians over the rounds, in µs. On a machine whose cores are")
	p("all busy, requests/s follows the total: every µs any of the three processes spends on a request")
	p("is a µs the others cannot use.")
	p("")
	p("| framework | app | app CPU/request | redis-server CPU/request | wrk CPU/request | total | Redis time per script call |")
	p("|---|---|---:|---:|---:|---:|---:|")
	for _, r := range rep.results {
		s := r.summary()
		for _, x := range []struct {
			name string
			s    appSummary
		}{{shippedName, s.batched}, {unbatchedName, s.example}, {"baseline", s.baseline}} {
			p("| %s | %s | %s | %s | %s | %s | %s |", r.fw, x.name, micros(x.s.appCPU), micros(x.s.redisCPU), micros(x.s.wrkCPU),
				micros(x.s.appCPU+x.s.redisCPU+x.s.wrkCPU), micros(x.s.scriptCall))
		}
	}
	p("")
	p("### How it is run")
	p("")
	p("- One redis-server started by the program on a free loopback port (no persistence), stopped by its")
	p("  pid at the end. Every app is built from this tree and started on a free loopback port, and")
	p("  stopped by its pid (SIGTERM) after its framework's runs.")
	timeout := ""
	if o.appTimeout > 0 {
		timeout = " -timeout " + o.appTimeout.String()
	}
	p("- Example apps: `-redis redis://127.0.0.1:PORT -limit %d -period 1m -algorithm %s -fail closed%s`", exampleLimit, o.algorithm, timeout)
	p("  (key `ip`, the default headers). The limit is far above what a run reaches, so every request is")
	p("  allowed and the allowing path is what is measured; `-fail closed` turns any Redis failure into a")
	p("  503 that wrk counts, instead of a local decision.")
	p("- Load: `wrk -t%d -c%d -d%v --latency --timeout %v` on `GET /`, from one client address", o.wrk.threads, o.wrk.connections, o.duration, o.wrk.timeout)
	p("  (127.0.0.1), so every request of a run decides the same key: ratekit's hot-key case.")
	p("- Example apps also get `-metrics`, so that each run can count their decisions, and the one")
	p("  as shipped `-batch` (its default, spelled out), the other `-batch=false`.")
	p("- Per framework: the three apps started, a %v warm-up run of each (not reported), then %d rounds", o.warmup, o.rounds)
	p("  in which each app runs once, the order rotating (-batch=false, as shipped, baseline in round 1;")
	p("  as shipped, baseline, -batch=false in round 2; and so on). The frameworks are measured one after the other.")
	p("- Checks, which stop the program when they fail: one `GET /` on each app before the runs answers")
	p("  200 with the same body, the example app's with every rate-limit header (`X-RateLimit-Limit:")
	p("  %d`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit-Policy`, `RateLimit`)", exampleLimit)
	p("  and the baseline's with none; in every run, wrk counts no non-2xx answer and no socket error;")
	p("  each example app counted one decision per request (`ratekit_decisions_total` on its `/metrics`),")
	p("  and Redis served one script call (EVALSHA or EVAL, from `INFO commandstats`) per request for the")
	p("  example app with -batch=false and the baseline, at most one for the app as shipped; within 0.99 to 1.05 (a few more")
	p("  belong to requests wrk cut off at the end of a run).")
	p("")
	if len(rep.results) > 0 {
		p("The example app's answer to the probing `GET /` (%s):", rep.results[0].fw)
		p("")
		p("```")
		p("HTTP/1.1 %d %s", rep.results[0].probe.status, http.StatusText(rep.results[0].probe.status))
		for _, l := range limitHeaderLines(rep.results[0].probe) {
			p("%s", l)
		}
		p("")
		p("%s", strings.TrimRight(rep.results[0].probe.body, "\n"))
		p("```")
		p("")
	}
	p("### Every run")
	p("")
	p("CPU is in µs per request: app, redis-server, wrk.")
	p("")
	p("| framework | round | app | req/s | p50 | p99 | requests | decisions / request | script calls / request | CPU/request | ÷ baseline |")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rep.results {
		s := r.summary()
		for i := range len(r.baseline) {
			for _, x := range []struct {
				name string
				runs []run
				vs   []float64
			}{{shippedName, r.batched, s.batchedVs.ratios}, {unbatchedName, r.example, s.exampleVs.ratios}, {"baseline", r.baseline, nil}} {
				if i >= len(x.runs) {
					continue
				}
				run := x.runs[i]
				ratio, decisions := "", "–"
				if i < len(x.vs) {
					ratio = fmt.Sprintf("%.2f×", x.vs[i])
				}
				if d := run.decisionsPerRequest(); d >= 0 {
					decisions = fmt.Sprintf("%.3f", d)
				}
				cpu := micros(run.perRequest(run.appCPU)) + " · " + micros(run.perRequest(run.redisCPU)) + " · " + micros(run.perRequest(run.wrk.cpu))
				p("| %s | %d | %s | %s | %s | %s | %s | %s | %.3f | %s | %s |", r.fw, i+1, x.name, figures.Thousands(run.wrk.perSecond),
					figures.Dur(run.wrk.p50), figures.Dur(run.wrk.p99), figures.Thousands(float64(run.wrk.requests)), decisions, run.callsPerRequest(), cpu, ratio)
			}
		}
	}
	p("%s", mdsection.End)
	return b.String()
}

// The rows of the example app: as it ships (batching on) and with
// -batch=false.
const (
	shippedName   = "as shipped"
	unbatchedName = "-batch=false"
)

// meetsBar reports whether the example app as it ships serves at least
// minRatio times its baseline's requests/s with a p99 no worse.
func meetsBar(s frameworkSummary, minRatio float64) bool {
	return s.batchedVs.ratio >= minRatio && s.batched.p99 <= s.baseline.p99
}
