// Command e2e measures the example apps end to end: wrk against each
// framework's example app (examples/<framework>) on a real Redis, with
// -batch=false and with -batch (as it ships), and against a baseline app of the same framework
// whose GET / handler makes one bare script call per request instead
// (bench/baseline/<framework>). It reports requests/s and latency of each,
// and each example's ratio to the baseline, per framework.
//
// It builds every app from this tree, starts its own redis-server on a free
// loopback port, starts the apps on free loopback ports, checks that every
// request is allowed (a limit far above what a run reaches; one probing
// request must carry the rate-limit headers; wrk must count no non-2xx
// answer and no socket error; each example app counts one decision per
// request), then runs wrk in interleaved rounds: per framework, the three
// apps take turns, and the ratios are taken within each round. It stops every process it started by its pid. Traffic goes to
// loopback only.
//
//	go run ./cmd/e2e -out ../docs/benchmarks.md    # from bench/; or bench/e2e.sh
//
// With -out it replaces only the end-to-end section of the file, between
// the lines <!-- e2e:begin --> and <!-- e2e:end -->; bench/run.sh, which
// rewrites the rest, carries that section over. It needs wrk (bench/e2e.sh
// installs Debian's package when it is missing) and redis-server on PATH.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/mdsection"
	"github.com/ratekit/ratekit/bench/internal/proccpu"
	"github.com/ratekit/ratekit/bench/internal/rediscost"
	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

type options struct {
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	wrk         wrkSettings
	frameworks  []string
	algorithm   string
	appTimeout  time.Duration
	out         string
	note        string
	cmdline     string
	timeout     time.Duration
	minRatio    float64
	strictRatio bool
}

func main() {
	var o options
	var fws string
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds per framework; figures are medians over them")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of one wrk run (whole seconds)")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "length of the warm-up wrk run of each app, not reported (whole seconds)")
	flag.IntVar(&o.wrk.threads, "threads", 2, "wrk threads (-t)")
	flag.IntVar(&o.wrk.connections, "connections", 64, "wrk connections (-c)")
	flag.DurationVar(&o.wrk.timeout, "wrk-timeout", 5*time.Second, "wrk --timeout: an answer slower than this is an error")
	flag.StringVar(&fws, "frameworks", strings.Join(frameworks, ","), "comma-separated frameworks to measure")
	flag.StringVar(&o.algorithm, "algorithm", "gcra", "the example apps' -algorithm")
	flag.DurationVar(&o.appTimeout, "app-timeout", 0, "the example apps' -timeout, their store deadline (0: their default, 50ms); longer on a machine whose other load stalls the processes past it, where each stall opens the breaker and fails closed")
	flag.StringVar(&o.out, "out", "", "replace the end-to-end section of this markdown file (default: print the section)")
	flag.StringVar(&o.note, "note", "", "a note on the machine, printed in the report")
	flag.StringVar(&o.cmdline, "cmdline", "", "command line to print in the report (default: this one)")
	flag.DurationVar(&o.timeout, "timeout", 0, "give up after this long (default: what the runs need, plus 5 minutes)")
	flag.Float64Var(&o.minRatio, "min-ratio", 1.3, "the ratio each example app as it ships should reach, with a p99 no worse than its baseline's; the report says which do")
	flag.BoolVar(&o.strictRatio, "strict", false, "exit 1 when an example app stays below -min-ratio")
	flag.Parse()
	o.frameworks = strings.Split(fws, ",")
	for _, fw := range o.frameworks {
		if !isFramework(fw) {
			fmt.Fprintf(os.Stderr, "e2e: unknown framework %q (have %s)\n", fw, strings.Join(frameworks, ", "))
			os.Exit(2)
		}
	}
	if o.rounds < 1 || o.duration < time.Second || o.warmup < time.Second || o.wrk.threads < 1 || o.wrk.connections < o.wrk.threads {
		fmt.Fprintln(os.Stderr, "e2e: need -rounds ≥ 1, -duration and -warmup ≥ 1s, and -connections ≥ -threads ≥ 1")
		os.Exit(2)
	}
	// wrk takes whole seconds
	o.duration, o.warmup = o.duration.Round(time.Second), o.warmup.Round(time.Second)
	o.wrk.timeout = max(time.Second, o.wrk.timeout.Round(time.Second))
	if o.cmdline == "" {
		o.cmdline = strings.TrimSpace("go run ./cmd/e2e " + strings.Join(os.Args[1:], " "))
	}
	if o.timeout == 0 {
		perFramework := 3*o.warmup + time.Duration(3*o.rounds)*(o.duration+5*time.Second) + 30*time.Second
		o.timeout = time.Duration(len(o.frameworks))*perFramework + 5*time.Minute
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	code := 0
	if err := e2e(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	cancel()
	stop()
	os.Exit(code)
}

func isFramework(fw string) bool {
	for _, f := range frameworks {
		if f == fw {
			return true
		}
	}
	return false
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// benchDir returns the bench module's directory, from the go command.
func benchDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	b, err := os.ReadFile(mod)
	if err != nil || !strings.Contains(string(b), "module github.com/ratekit/ratekit/bench\n") {
		return "", fmt.Errorf("run this from bench/ (the go.mod here is %q)", mod)
	}
	return filepath.Dir(mod), nil
}

func e2e(ctx context.Context, o options) (err error) {
	started := time.Now()
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk not found on PATH: run bench/e2e.sh, which installs it (apt-get install -y wrk): %w", err)
	}
	dir, err := benchDir()
	if err != nil {
		return err
	}
	if o.out != "" {
		// fail now, not after the runs, if the report cannot be written
		if _, err := os.Stat(filepath.Dir(o.out)); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "ratekit-e2e-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	progress("building %d example apps and their baselines", len(o.frameworks))
	bins, err := build(ctx, dir, tmp, o.frameworks)
	if err != nil {
		return err
	}

	srv, err := redisproc.Start()
	if err != nil {
		return err
	}
	progress("redis-server pid %d on %s", srv.Pid(), srv.Addr)
	defer func() {
		if stopErr := srv.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	stats := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	defer stats.Close()

	rep := &report{opts: o, started: started, wrkVersion: wrkVersion(), redisVersion: redisproc.Version(ctx, stats)}
	for _, fw := range o.frameworks {
		res, err := measureFramework(ctx, o, fw, bins[fw], srv, stats, tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", fw, err)
		}
		rep.results = append(rep.results, res)
	}
	rep.finished = time.Now()

	section := rep.markdown()
	if o.out == "" {
		fmt.Print(section)
	} else if err := writeSection(o.out, section); err != nil {
		return err
	} else {
		progress("wrote the end-to-end section of %s", o.out)
	}
	for _, r := range rep.results {
		s := r.summary()
		progress("%s: as shipped %.0f req/s, -batch=false %.0f req/s, baseline %.0f req/s: %.2f× (%.2f–%.2f), p99 %v against %v; -batch=false %.2f× (%.2f–%.2f)",
			r.fw, s.batched.perSecond, s.example.perSecond, s.baseline.perSecond,
			s.batchedVs.ratio, s.batchedVs.low, s.batchedVs.high, s.batched.p99, s.baseline.p99,
			s.exampleVs.ratio, s.exampleVs.low, s.exampleVs.high)
	}
	if o.strictRatio {
		var below []string
		for _, r := range rep.results {
			if s := r.summary(); !meetsBar(s, o.minRatio) {
				below = append(below, fmt.Sprintf("%s %.2f×, p99 %v against %v", r.fw, s.batchedVs.ratio, s.batched.p99, s.baseline.p99))
			}
		}
		if len(below) > 0 {
			return fmt.Errorf("below %.2f× the baseline or with a worse p99: %s", o.minRatio, strings.Join(below, ", "))
		}
	}
	return nil
}

// writeSection replaces the end-to-end section of the file at path (or
// appends it), through a temporary file renamed over it.
func writeSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := path + ".e2e.tmp"
	if err := os.WriteFile(tmp, []byte(mdsection.Replace(string(old), section)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// run is one wrk run of one app.
type run struct {
	wrk wrkResult
	// scriptCalls is how many scripts Redis ran during the run (EVALSHA
	// and EVAL, from INFO commandstats), and scriptTime the time Redis
	// spent running them.
	scriptCalls int64
	scriptTime  time.Duration
	// decisions is how many decisions an example app counted during the
	// run (ratekit_decisions_total on its /metrics); -1 for the baseline.
	decisions int64
	// CPU time used during the run by the app and by redis-server; zero
	// where /proc cannot tell.
	appCPU, redisCPU time.Duration
}

// perRequest returns d per completed request.
func (r run) perRequest(d time.Duration) time.Duration {
	if r.wrk.requests == 0 {
		return 0
	}
	return d / time.Duration(r.wrk.requests)
}

// perScriptCall is Redis's time per script call.
func (r run) perScriptCall() time.Duration {
	if r.scriptCalls == 0 {
		return 0
	}
	return r.scriptTime / time.Duration(r.scriptCalls)
}

// decisionsPerRequest is the app's decisions per completed request, or -1
// if it has no count.
func (r run) decisionsPerRequest() float64 {
	if r.decisions < 0 || r.wrk.requests == 0 {
		return -1
	}
	return float64(r.decisions) / float64(r.wrk.requests)
}

// callsPerRequest is Redis script calls per completed request.
func (r run) callsPerRequest() float64 {
	if r.wrk.requests == 0 {
		return 0
	}
	return float64(r.scriptCalls) / float64(r.wrk.requests)
}

// frameworkResult holds one framework's runs, one per round and app.
type frameworkResult struct {
	fw string
	// example is the example app as it ships, batched the example app with
	// -batch, baseline the baseline app
	example, batched, baseline []run
	probe                      probe // the example app's answer to one GET /
	probeBaseline              probe
}

// measureFramework starts the example app of fw (plain and with -batch)
// and its baseline app, checks them, and runs wrk on each, in turn,
// o.rounds times.
func measureFramework(ctx context.Context, o options, fw string, bins binaries, srv *redisproc.Server, stats *redis.Client, logDir string) (res *frameworkResult, err error) {
	res = &frameworkResult{fw: fw}
	var ex, exb, base *app
	for _, a := range []struct {
		p    **app
		name string
		bin  string
		args []string
	}{
		{&ex, "example " + fw, bins.example, exampleArgs(srv.Addr, o, false)},
		{&exb, "example " + fw + " -batch", bins.example, exampleArgs(srv.Addr, o, true)},
		{&base, "baseline " + fw, bins.baseline, baselineArgs(srv.Addr)},
	} {
		started, err := startApp(ctx, a.name, a.bin, logDir, a.args...)
		if err != nil {
			return nil, err
		}
		defer func() {
			if stopErr := started.stop(); stopErr != nil && err == nil {
				err = stopErr
			}
		}()
		*a.p = started
	}
	ex.example, exb.example, exb.batched = true, true, true
	progress("%s: example app pid %d on %s, with -batch pid %d on %s, baseline pid %d on %s", fw,
		ex.cmd.Process.Pid, ex.url, exb.cmd.Process.Pid, exb.url, base.cmd.Process.Pid, base.url)

	if res.probe, err = ex.get(ctx, "/"); err != nil {
		return nil, err
	}
	if res.probeBaseline, err = base.get(ctx, "/"); err != nil {
		return nil, err
	}
	if err := checkProbes(res.probe, res.probeBaseline); err != nil {
		return nil, fmt.Errorf("probing GET /: %w\n%s\n%s", err, ex.logTail(), base.logTail())
	}
	batchedProbe, err := exb.get(ctx, "/")
	if err != nil {
		return nil, err
	}
	if err := checkProbes(batchedProbe, res.probeBaseline); err != nil {
		return nil, fmt.Errorf("probing GET / with -batch: %w\n%s", err, exb.logTail())
	}

	measure := func(a *app, d time.Duration) (run, error) {
		calls0, time0, err := scriptStats(ctx, stats)
		if err != nil {
			return run{}, err
		}
		var dec0 int64
		if a.example {
			if dec0, err = a.decisions(ctx); err != nil {
				return run{}, err
			}
		}
		app0, appOK := proccpu.CPU(a.cmd.Process.Pid)
		redis0, redisOK := proccpu.CPU(srv.Pid())
		w, out, err := runWrk(ctx, o.wrk, a.url+"/", d)
		if err != nil {
			return run{}, fmt.Errorf("%s: %w", a.name, err)
		}
		app1, appOK1 := proccpu.CPU(a.cmd.Process.Pid)
		redis1, redisOK1 := proccpu.CPU(srv.Pid())
		calls1, time1, err := scriptStats(ctx, stats)
		if err != nil {
			return run{}, err
		}
		r := run{wrk: w, scriptCalls: calls1 - calls0, scriptTime: time1 - time0, decisions: -1}
		if a.example {
			dec1, err := a.decisions(ctx)
			if err != nil {
				return run{}, err
			}
			r.decisions = dec1 - dec0
		}
		if appOK && appOK1 && redisOK && redisOK1 {
			r.appCPU, r.redisCPU = app1-app0, redis1-redis0
		}
		if a.exited() {
			return r, fmt.Errorf("%s exited during the run:\n%s", a.name, a.logTail())
		}
		if w.failures() > 0 {
			return r, fmt.Errorf("%s: %d non-2xx answers, socket errors: %d connect, %d read, %d write, %d timeout; every request must be allowed\n%s\n%s",
				a.name, w.non2xx, w.connectErrs, w.readErrs, w.writeErrs, w.timeouts, out, a.logTail())
		}
		return r, checkRun(a, r)
	}

	apps := []*app{ex, exb, base}
	for _, a := range apps {
		w, err := measure(a, o.warmup)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		progress("%s: warm-up %s: %.0f req/s", fw, a.name, w.wrk.perSecond)
	}
	for r := range o.rounds {
		// rotate which app goes first, so that none always runs right
		// after the same other's load
		order := append(slices.Clone(apps[r%len(apps):]), apps[:r%len(apps)]...)
		for _, a := range order {
			w, err := measure(a, o.duration)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", r+1, err)
			}
			switch a {
			case ex:
				res.example = append(res.example, w)
			case exb:
				res.batched = append(res.batched, w)
			default:
				res.baseline = append(res.baseline, w)
			}
			progress("%s: round %d/%d %s: %.0f req/s, p50 %v, p99 %v", fw, r+1, o.rounds, a.name, w.wrk.perSecond, w.wrk.p50, w.wrk.p99)
		}
	}
	return res, nil
}

// checkRun checks a run's fixture: every answered request was decided once
// (the example apps' own count, within 0.99 to 1.05: a few more belong to
// requests wrk cut off at the end), and took one script call, or, through
// -batch, at most one.
func checkRun(a *app, r run) error {
	if a.example {
		if d := r.decisionsPerRequest(); d < 0.99 || d > 1.05 {
			return fmt.Errorf("%s: %d decisions for %d requests: not one per request", a.name, r.decisions, r.wrk.requests)
		}
	}
	c := r.callsPerRequest()
	if c > 1.05 || (!a.batched && c < 0.99) {
		return fmt.Errorf("%s: %d script calls for %d requests: not one per request", a.name, r.scriptCalls, r.wrk.requests)
	}
	return nil
}

// scriptStats returns how many EVALSHA and EVAL calls Redis has served,
// and the time it spent in them.
func scriptStats(ctx context.Context, c *redis.Client) (calls int64, spent time.Duration, err error) {
	cost, err := rediscost.Sample(ctx, c, 0)
	if err != nil {
		return 0, 0, err
	}
	return cost.ScriptCalls, time.Duration(cost.ScriptUsec) * time.Microsecond, nil
}
