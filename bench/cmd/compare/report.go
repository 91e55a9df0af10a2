package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratekit/bench/internal/proccpu"

	"github.com/ratekit/ratekit/bench/internal/figures"
	"github.com/ratekit/ratekit/bench/internal/mdsection"
)

type report struct {
	opts              options
	started, finished time.Time
	redisVersion      string
	cases             []benchCase
	bench             *benchResults
	network           *networkResults // nil without -latency
	exact             []exactResult
	// e2e is the end-to-end section of the file being replaced, markers
	// included, or empty.
	e2e string
}

// write renders the report as markdown.
func (rep *report) write(out io.Writer) error {
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	o := rep.opts
	cs := rep.bench.contenders

	p("# Benchmarks: ratekit and other Go rate limiters on Redis")
	p("")
	p("<!-- Written by bench/run.sh (bench/cmd/compare); edits by hand are lost on the next run. The one")
	p("exception is the section between the e2e:begin and e2e:end markers: bench/e2e.sh (bench/cmd/e2e)")
	p("writes it, and bench/run.sh carries it over unchanged. -->")
	p("")
	p("Command: `%s`, from `bench/`. Run on %s; it took %v.",
		o.cmdline, rep.started.UTC().Format("2006-01-02 15:04 MST"), rep.finished.Sub(rep.started).Round(time.Second))
	p("")
	machine := fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if m := proccpu.Model(); m != "" {
		machine += ", " + m
	}
	p("Machine: %s; %s; redis-server %s on loopback, started by the program, no persistence, sharing the CPUs with the clients.", machine, runtime.Version(), rep.redisVersion)
	if o.note != "" {
		p("%s", o.note)
	}
	if o.quick {
		p("")
		p("**Quick mode: a handful of decisions per run. These figures check that the program works; they measure nothing.**")
	}
	p("")
	p("Absolute figures depend on the machine and on whatever else it was doing; the **ratios** are what")
	p("to read. Each ratio divides a contender's decisions/s by the bare script's on the same case in the")
	p("same round, whose runs take turns in %d slices each, and is the median of %d rounds.", runSlices, o.rounds)
	p("")

	p("## Headline: ratekit GCRA as it ships against the bare script")
	p("")
	headline(p, rep.bench, rep.opts.rounds)
	p("### Each algorithm as it ships against the best peer of its kind, and the goals")
	p("")
	writeBars(p, rep.bench)
	p("%s", ceilingText(rep.bench))
	p("")
	if ms := misses(rep.bench); len(ms) > 0 {
		p("Cells that miss: %s.", strings.Join(ms, "; "))
		p("")
	}
	rep.networkSection(p)
	rep.endToEnd(w)

	p("## What is measured")
	p("")
	p("- One redis-server, one go-redis v9 client shared by every contender: ratekit, the libraries that")
	p("  take a go-redis client, and the baselines. The client is built as README.md's quick start builds")
	p("  it, `ContextTimeoutEnabled: true` and `MaxRetries: -1`, with `PoolSize` 256. The one exception is")
	p("  %s: a ratekit-server process with its own client to the same redis-server, which this program", serverName)
	p("  calls over gRPC (see the notes). Limits are per minute, the same")
	p("  rate for everyone: %s per minute in the throughput runs, so that the allowing path is what is", figures.Thousands(float64(benchLimit)))
	p("  measured (denials are still counted and shown), and %d per minute in the exactness check.", exactLimit)
	p("- Cases: %s goroutines, each on one hot key and on %s keys (distinct identities, keys taken in", joinInts(goroutineCounts), figures.Thousands(manyKeys))
	p("  turn, so concurrent calls hit different keys). Every contender has keys of its own. The identities")
	p("  are client addresses, `%s` on the hot key and `ip:10.x.y.z` on the others, as the middleware", hotIdentity)
	p("  row's `keyfuncs.IP` finds them in `RemoteAddr`.")
	if o.quick {
		p("- Quick mode: each run makes goroutines + %d decisions.", quickExtra)
	} else {
		p("- Each run makes a number of decisions fixed before it starts: the median rate of that contender")
		p("  on that case so far, warm-up included, times %v, so that a run lasts about that long. The", o.duration)
		p("  warm-up also opens the pool's connections and loads the scripts.")
	}
	p("- Rounds: in each of %d rounds every contender runs once on every case, its run cut into %d", o.rounds, runSlices)
	p("  slices that the contenders of the case take in turn (every contender's first slice, then every")
	p("  second one, and so on), so that all of them share the machine's moments, whose noise changes over")
	p("  seconds; the order is drawn anew for every slice, so that no contender always runs first or right")
	p("  after the same other one. A round's figures of a contender are its slices' together. Figures are")
	p("  medians over the rounds; denials and errors are summed over them.")
	p("- decisions/s counts allowed and denied decisions (not errors) over its slices' wall time. p50 and p99")
	p("  are of every call's latency in the run. allocs/decision is the heap allocations of the whole")
	p("  process during the run (`runtime.MemStats.Mallocs`) over the calls made; the measuring loop")
	p("  itself allocates nothing, but go-redis's and the runtime's background work is included.")
	p("  client CPU µs is this process's user + system time during the run (`/proc/self/stat`, in ticks")
	p("  of 10 ms) over the calls made: what the contender's client side costs a core per decision,")
	p("  the Go runtime's scheduling included (and, in the network pass, the in-process proxy's work;")
	p("  the ratekit-server row's server runs in a process of its own, which it leaves out).")
	p("- Redis's cost: before and after each slice of a run the program reads redis-server's `INFO commandstats` and")
	p("  `INFO stats` (through a client of its own) and its CPU time from `/proc/<pid>/stat`; the")
	p("  differences over the run's calls are the cost per decision (see \"Redis's cost per decision\").")
	if o.latency > 0 {
		p("- A second pass (\"Through a network\") runs fewer contenders through an in-process toxiproxy")
		p("  that adds %v each way between the client and redis-server, in %d round%s.", o.latency, rep.network.rounds, plural(rep.network.rounds))
	}
	p("- Fixture checks, which stop the program when they fail: each key set holds exactly 1 or %s", figures.Thousands(manyKeys))
	p("  distinct keys; every planned call is made and counted as allowed, denied or error; the baselines")
	p("  never fail; and, before anything is measured, each limiter under a limit of 3 per minute")
	p("  admits exactly 3 of 5 calls on a fresh key (a charge row 2, each answered after it spent), so")
	p("  allowed and denied are read the right way round,")
	p("  and each ratekit row, through a store, a Limiter or the middleware, writes its state under the")
	p("  key a Limiter builds, prefix + rule + `:{` + identity + `}`.")
	p("")

	p("## Contenders")
	p("")
	p("| contender | module | version | algorithm | set up and called as |")
	p("|---|---|---|---|---|")
	versions := moduleVersions()
	for _, c := range cs {
		v := versions[c.module]
		if c.also != "" {
			v += fmt.Sprintf(" (with `%s` %s)", c.also, versions[c.also])
		}
		p("| %s | `%s` | %s | %s | %s |", c.name, c.module, v, c.algorithm, c.setup)
	}
	p("")

	p("## Decisions/s as a multiple of the bare script")
	p("")
	ratioTable(p, rep.bench)
	costSection(p, rep.bench)
	p("## Each case")
	p("")
	p("× bare: decisions/s over the bare script's (higher is faster); p50 × bare: median latency over the")
	p("bare script's (lower is faster); both medians of per-round ratios. calls: all calls over all rounds.")
	p("script µs to bytes: redis-server's cost per decision, as in \"Redis's cost per decision\" above.")
	for k, bc := range rep.cases {
		p("")
		keys := "one hot key"
		if bc.keys.count > 1 {
			keys = figures.Thousands(float64(bc.keys.count)) + " keys"
		}
		p("### %s, %d goroutine%s", keys, bc.g, plural(bc.g))
		p("")
		p("| contender | decisions/s | × bare | p50 | p99 | p50 × bare | allocs/decision | client CPU µs | calls | denied | errors | %s |", costColumns)
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s", strings.Repeat("---:|", 6))
		for ci, c := range cs {
			s := rep.bench.cells[k][ci].summary()
			p("| %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %d | %d |%s", c.name, figures.Thousands(s.perSecond), ratio(s.vsBare),
				figures.Dur(s.p50), figures.Dur(s.p99), ratio(s.p50VsBare), s.allocs, clientCPU(s), figures.Thousands(float64(s.decisions)), s.denied, s.errors, costCells(s))
		}
	}
	p("")
	var errNotes []string
	for ci, c := range cs {
		for k, bc := range rep.cases {
			if s := rep.bench.cells[k][ci].summary(); s.errors > 0 {
				errNotes = append(errNotes, fmt.Sprintf("- %s, %v: %d errors; the first: `%s`", c.name, bc, s.errors, oneLine(s.firstErr)))
			}
		}
	}
	if len(errNotes) > 0 {
		p("Errors (calls that returned an error instead of a decision; their latency is in p50/p99):")
		p("")
		for _, n := range errNotes {
			p("%s", n)
		}
		p("")
	}

	if rep.exact != nil {
		p("## Exactness across processes")
		p("")
		attempts, maxTime := exactPlan(o.quick)
		p("%d processes of this program (re-executed as children), %d goroutines each, share one key on", exactProcesses, exactGoroutines)
		p("the one redis-server, under a limit of %d per minute, starting together on a fresh key. Each", exactLimit)
		p("process makes up to %d calls, within %v. An exact limiter admits %d. GCRA and token buckets", attempts, maxTime, exactLimit)
		p("refill %d per minute as time passes, so they may admit up to the bound: %d + the window", exactLimit, exactLimit)
		p("(first call to last, over all processes) / %v. Limiters whose windows are aligned to the", time.Minute/exactLimit)
		p("clock start at least %v before a minute ends, so that no window edge falls in the check.", exactStartDelay+maxTime+exactMargin)
		p("ratekit's hot-key leasing admits by design up to (lease size − 1) × replicas more per window")
		p("(`leasestore.New`'s documented bound): its leases here are of %d units (1/64 of the limit),", exactLeaseSize)
		p("so its bound adds (%d − 1) × %d processes = %d; and as leased units may expire unspent, it may admit", exactLeaseSize, exactProcesses, (exactLeaseSize-1)*exactProcesses)
		p("as many fewer than the limit. %s starts a server in each process: four replicas of", serverName)
		p("ratekit-server share the key. %s counts a turn whose time to act is later than now as", outboundName)
		p("denied (and leaves it reserved, as a caller that went on to sleep to it would).")
		p("")
		p("| limiter | algorithm | calls | admitted | denied | errors | window | bound | verdict |")
		p("|---|---|---:|---:|---:|---:|---:|---:|---|")
		for _, r := range rep.exact {
			p("| %s | %s | %d | %d | %d | %d | %s | %d | %s |", r.c.name, r.c.algorithm, r.attempts, r.allowed, r.denied,
				r.errors, r.window.Round(time.Millisecond), r.bound, r.verdict())
		}
		p("")
		for _, r := range rep.exact {
			if r.errors > 0 {
				p("- %s: %d errors; the first: `%s`", r.c.name, r.errors, oneLine(errors.New(r.firstErr)))
			}
		}
		p("")
	}

	p("## Notes")
	p("")
	for _, n := range notes {
		p("- %s", strings.ReplaceAll(n, "{deadline}", deadlineText()))
	}
	return w.Flush()
}

// endToEnd writes the end-to-end section carried over from the previous
// report, or, when there was none, its markers around a pointer to the
// program that fills them.
func (rep *report) endToEnd(w *bufio.Writer) {
	sec := rep.e2e
	if sec == "" {
		sec = mdsection.Begin + "\n## End to end: the example apps under wrk\n\nNot measured yet: `bench/e2e.sh` writes this section.\n" + mdsection.End + "\n"
	}
	w.WriteString(sec)
	w.WriteString("\n")
}

// notes explain settings and what the figures include.
var notes = []string{
	"Every library is used through its documented entry point with its defaults, except where a " +
		"setting makes the comparison like for like: one shared client with a pool of 256 " +
		"connections wherever a library takes a go-redis client (all of them here), built as " +
		"README.md's quick start builds it (`ContextTimeoutEnabled: true`, `MaxRetries: -1`), and " +
		"`FallbackDisabled` for httprate-redis, so that its Redis errors are counted instead of " +
		"being answered by a local in-memory counter.",
	"httprate's decision call, `OnLimit`, takes an `http.ResponseWriter` and an `*http.Request` and " +
		"writes rate-limit headers on every call; its allocations include that. httprate is at its " +
		"newest version rather than the older one httprate-redis requires. A `RateLimiter` holds a " +
		"mutex around the read (`MGET`) and the increment (`MULTI INCRBY EXPIRE EXEC`), so it " +
		"makes one decision at a time, for any key, two round trips each, whatever the goroutine " +
		"count; across processes the read and the increment are separate commands.",
	"throttled's GCRA reads (`TIME` and `GET` in a pipeline) and then writes by compare-and-swap " +
		"(`EVAL` of the whole script, no `EVALSHA`), retrying up to 10 times: on a hot key, " +
		"concurrent callers make it retry and, past 10, return an error, which shows in the errors column.",
	"mennanov/limiters' token bucket takes a redsync lock on Redis around a read and a " +
		"transactional write (four round trips), and a local mutex per bucket; its buckets and sliding " +
		"windows are objects bound to one key, kept in the library's `Registry` as in its own per-IP " +
		"example, so the first call for a key creates one (allocations in the first round on 100k keys).",
	"ulule/limiter's window starts at a key's first hit (`INCRBY`, then `PEXPIRE` on the first), so " +
		"it is a fixed window per key, not aligned to the clock; it counts denied calls too.",
	"The rows named after an algorithm alone (ratekit gcra, fixed, sliding-log, sliding-counter) are " +
		"the stores as they ship: `redisstore.New(client)`, which batches by default for a " +
		"`*redis.Client`: calls that arrive while every pipeline slot is busy share the next pipeline, " +
		"and calls of one limit in a pipeline share one script call. It pays with many calls in " +
		"flight; a lone caller goes out at once, as without it. The unbatched rows " +
		"(`redisstore.WithoutBatching()`) make one script call per decision: they show the scripts' own cost.",
	"ratekit Limiter.Check is a decision as every middleware makes it: `Limiter.Check` with one rule " +
		"(GCRA) over the store as it ships, with the Limiter's deadline, breaker and denied-key " +
		"cache, failing closed so that a Redis failure is counted as an error, not answered locally. " +
		"Its deadline is {deadline}: in the network pass the " +
		"in-process proxy, sharing a few CPUs with the clients and redis-server, queues calls past " +
		"50 ms at hundreds of goroutines, and each deadline hit closes its connection " +
		"(`ContextTimeoutEnabled`), which costs more stalls; the middleware row's Limiter is the same. " +
		"On a machine whose other load stalls these processes past 50 ms, each stall opens the breaker, " +
		"and failing closed then fails every call until the next probe, counted as errors rather than " +
		"decisions: such a run sets a longer deadline with `-limiter-timeout`, which this note then names. " +
		"Its keys are those the Limiter builds, prefix + rule + \":{\" + identity + \"}\", as for every ratekit row.",
	"ratekit net/http+leasing serves each decision through the net/http middleware (`nethttp.New`, " +
		"identity from the client's address by `keyfuncs.IP`, every rate-limit header written) in front " +
		"of a handler that only answers 200, over a Limiter over `leasestore.New`, called in " +
		"process with `ServeHTTP`: what an application pays per request for the limit, less the HTTP " +
		"server. Its exactness bound is the leasing row's.",
	"ratekit gcra leasing is the default GCRA through `leasestore.New`: a key that saw two or " +
		"more decisions in the current or previous 100 ms takes up to 1/64 of the limit's capacity (at " +
		"most 65,536 units, and no more than its demand in those 100 ms) per Redis call and spends them " +
		"locally, so on the hot key most decisions make no round trip at all, and it outruns the " +
		"bare script by design. The price is its documented overshoot, which the exactness check " +
		"allows for; on 100,000 keys each key is cold and every decision passes through.",
	"ratekit outbound.Reserve is the outbound throttle's reservation (package `outbound`): one " +
		"`Reserve` a decision, one script call that pushes the key's schedule (GCRA's theoretical " +
		"arrival time, kept in Redis on Redis's clock) forward and hands back the caller's time to act; " +
		"over the *redis.Client here, reservations made at once share pipelined round trips, and " +
		"a round trip's go as one script run, each reserved in turn as alone. The comparison never sleeps to the turn nor cancels it: a reservation whose time to act is now " +
		"counts as allowed, a later one as denied, one decided without Redis (`Degraded`) as an error. " +
		"The throughput runs' limit, " + figures.Thousands(float64(benchLimit)) + " per minute with a burst as large, is one unit a " +
		"microsecond, the fastest Limit outbound accepts, and far above any run's rate: no reservation " +
		"there has to wait, so what is measured is the reservation's cost, without the wait. Its " +
		"Limiter also beats a heartbeat into Redis once a second (one script call, in the Redis cost " +
		"of whichever run it falls in) and holds a pub/sub subscription for pauses; its deadline is " +
		"the Limiter rows', {deadline}.",
	"ratekit-server gRPC is envoy's rate limit service as ratekit-server answers it: the binary, built " +
		"from this tree (`go build -C cmd/ratekit-server`) once per run, runs as a process of its own " +
		"on free loopback ports, started by this program for each limit with a configuration of one " +
		"domain and one descriptor, against this program's redis-server (through the proxy in the " +
		"network pass), and stopped by its pid; in the exactness check each child process starts one. " +
		"It counts as envoy does by default (`RATEKIT_ALGORITHM=compatible`: a fixed window a minute, " +
		"in its own script) through a Limiter with ratekit's deadline (the Limiter rows', {deadline}), " +
		"breaker and batching (`RATEKIT_BATCH=4` pipelines in flight), failing closed, so that a " +
		"decision Redis did not make shows as a denial, never as a local allow. Each call crosses gRPC " +
		"over loopback: the client's marshalling and HTTP/2, the server's decoding, matching, decision " +
		"and answer. The server's process shares the machine's CPUs with this program's goroutines and " +
		"with redis-server, so on a few cores its CPU time lowers every figure of its row; its " +
		"allocations per decision are this program's only (gRPC's client side), not the server's.",
	"The bare script is not a limiter: it counts and never denies. It is the floor for a decision " +
		"made by one script call through go-redis; PING is the floor for any round trip.",
	"bare TIME+GET+SET decides nothing either: it reads Redis's clock and one key and writes the key " +
		"back with an expiry, the least that a script must do which, like ratekit's, reads the " +
		"server's clock and keeps a state it computes from it (a counter's INCR does both its read " +
		"and its write in one command and needs no clock). It shows how much of ratekit's distance " +
		"to the bare script those duties alone account for.",
	"ratekit's sliding-window log keeps one sorted-set member per admitted unit over the last " +
		"period; at the throughput runs' limit that is every call of the last minute, so on the hot " +
		"key it works on a set of up to a minute of traffic.",
	"redis-server runs on the same CPUs as the clients: with few cores, the client side's CPU " +
		"time per decision (allocations, parsing, extra round trips) lowers every figure, the " +
		"server's share included. A path that keeps more of the client's threads busy also competes " +
		"with the single-threaded redis-server for the cores, so that at 64 and 256 goroutines " +
		"Limiter.Check ÷ ratekit gcra measures that as much as the Limiter's own work: with the " +
		"client held to one P (`GOMAXPROCS=1`), `BenchmarkLimiter`'s middleware path makes 0.98× the " +
		"decisions/s of the bare store call at 256 goroutines, against 0.87× with two " +
		"(docs/measurements.md, the Limiter's own cost).",
	"Libraries left out: none; all build with Go 1.26. Their versions are pinned in `bench/go.mod`.",
}

// failure returns an error if ratekit failed a check that is not about
// timings: an error in any call, or more admitted than the limit allows.
func (rep *report) failure() error {
	errs := ratekitErrors(rep.bench, "")
	if rep.network != nil {
		errs = append(errs, ratekitErrors(rep.network.bench, "network pass: ")...)
	}
	for _, r := range rep.exact {
		if r.c.kind == kindRatekit && (r.errors > 0 || r.allowed > r.bound || r.attempts >= r.bound && r.allowed < r.floor) {
			errs = append(errs, fmt.Errorf("exactness of %s: %d admitted of %d calls, bound %d, %d errors (%s)",
				r.c.name, r.allowed, r.attempts, r.bound, r.errors, r.firstErr))
		}
	}
	return errors.Join(errs...)
}

// ratekitErrors returns an error for each case in which a ratekit
// contender of res had errors, each starting with pass.
func ratekitErrors(res *benchResults, pass string) []error {
	var errs []error
	for ci, c := range res.contenders {
		if c.kind != kindRatekit {
			continue
		}
		for k, bc := range res.cases {
			if s := res.cells[k][ci].summary(); s.errors > 0 {
				errs = append(errs, fmt.Errorf("%s%s, %v: %d errors: %w", pass, c.name, bc, s.errors, s.firstErr))
			}
		}
	}
	return errs
}

// moduleVersions maps module paths to the versions built into this binary.
func moduleVersions() map[string]string {
	v := map[string]string{"github.com/ratekit/ratekit": "this tree"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, d := range bi.Deps {
		if d.Replace == nil {
			v[d.Path] = d.Version
		}
	}
	return v
}

func ratio(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) + "×" }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func oneLine(err error) string {
	if err == nil {
		return ""
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ReplaceAll(s, "`", "'")
}

// clientCPU formats s's client CPU per decision, or "" when it could not be
// read.
func clientCPU(s summary) string {
	if !s.cpuOK {
		return ""
	}
	return fmt.Sprintf("%.2f", s.cpu)
}
