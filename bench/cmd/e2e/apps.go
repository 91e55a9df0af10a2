package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

// frameworks are the example apps, by their directory under examples/ and
// under bench/baseline/.
var frameworks = []string{"nethttp", "gin", "echo", "fiber"}

// exampleLimit is the example apps' -limit: so high that no request of a
// run is denied (runs make a few hundred thousand requests per minute):
// the fastest GCRA limit ratekit accepts, one unit a microsecond.
const exampleLimit = 60_000_000

// binaries are the built apps of one framework.
type binaries struct{ example, baseline string }

// build compiles every framework's example app (in the root module) and
// baseline app (in the bench module) into dir.
func build(ctx context.Context, benchDir, dir string, fws []string) (map[string]binaries, error) {
	root := filepath.Dir(benchDir)
	out := map[string]binaries{}
	for _, fw := range fws {
		b := binaries{
			example:  filepath.Join(dir, "example-"+fw),
			baseline: filepath.Join(dir, "baseline-"+fw),
		}
		for _, job := range []struct{ dir, bin, pkg string }{
			{root, b.example, "./examples/" + fw},
			{benchDir, b.baseline, "./baseline/" + fw},
		} {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", job.bin, job.pkg)
			cmd.Dir = job.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build %s (in %s): %w\n%s", job.pkg, job.dir, err, out)
			}
		}
		out[fw] = b
	}
	return out, nil
}

// app is a running app under test: a process of ours on a loopback port.
type app struct {
	name string // e.g. "example gin"
	// example is set for an example app, which serves its decision count
	// at /metrics; batched for one run with -batch
	example, batched bool
	url              string // http://127.0.0.1:PORT
	log              string // its standard output and error
	cmd              *exec.Cmd
	done             chan struct{}
}

// startApp starts bin with args and -addr on a free loopback port, and
// waits until its /healthz answers 200. It tries a few ports, in case the
// one it picked is taken before the app binds it.
func startApp(ctx context.Context, name, bin, logDir string, args ...string) (*app, error) {
	var lastErr error
	for attempt := range 3 {
		port, err := redisproc.FreePort()
		if err != nil {
			return nil, err
		}
		a := &app{
			name: name,
			url:  "http://127.0.0.1:" + strconv.Itoa(port),
			log:  filepath.Join(logDir, strings.ReplaceAll(name, " ", "-")+"-"+strconv.Itoa(attempt)+".log"),
			done: make(chan struct{}),
		}
		logFile, err := os.Create(a.log)
		if err != nil {
			return nil, err
		}
		a.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:" + strconv.Itoa(port)}, args...)...)
		a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
		a.cmd.SysProcAttr = redisproc.SysProcAttr()
		err = a.cmd.Start()
		logFile.Close()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		go func() { _ = a.cmd.Wait(); close(a.done) }()
		if lastErr = a.waitReady(ctx, 30*time.Second); lastErr == nil {
			return a, nil
		}
		_ = a.stop()
	}
	return nil, lastErr
}

// waitReady polls /healthz until it answers 200.
func (a *app) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(a.url + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/healthz answered %s", resp.Status)
		}
		select {
		case <-a.done:
			return fmt.Errorf("%s (pid %d) exited before it was ready:\n%s", a.name, a.cmd.Process.Pid, a.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) not ready after %v: %v\n%s", a.name, a.cmd.Process.Pid, timeout, err, a.logTail())
		}
	}
}

// stop asks the app to shut down (SIGTERM to its pid), and kills it by its
// pid if it is still running 10 seconds later.
func (a *app) stop() error {
	select {
	case <-a.done:
		return nil
	default:
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s (pid %d): %w", a.name, a.cmd.Process.Pid, err)
	}
	select {
	case <-a.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	if err := a.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", a.name, a.cmd.Process.Pid, err)
	}
	select {
	case <-a.done:
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for 10s and was killed", a.name, a.cmd.Process.Pid)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", a.name, a.cmd.Process.Pid)
	}
}

// exited reports whether the app's process has ended.
func (a *app) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func (a *app) logTail() string {
	b, _ := os.ReadFile(a.log)
	return string(redisproc.Tail(b, 2000))
}

// probe is one request's answer, as curl -i would show it.
type probe struct {
	status int
	header http.Header
	body   string
}

// get makes one GET of path on the app, on a connection of its own.
func (a *app) get(ctx context.Context, path string) (probe, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+path, nil)
	if err != nil {
		return probe{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return probe{}, fmt.Errorf("%s: GET %s: %w", a.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return probe{}, fmt.Errorf("%s: GET %s: %w", a.name, path, err)
	}
	return probe{status: resp.StatusCode, header: resp.Header, body: string(body)}, nil
}

// limitHeaders are the fields every response of a limited route carries
// with the example apps' default header style (legacy and IETF).
var limitHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"}

// checkProbes verifies one GET / on each app of a framework: both answer
// 200 with the same body; the example app's answer carries every
// rate-limit header, with the configured limit, and the baseline's none.
func checkProbes(example, baseline probe) error {
	var errs []error
	if example.status != http.StatusOK {
		errs = append(errs, fmt.Errorf("example app: GET / answered %d, want 200: %q", example.status, example.body))
	}
	if baseline.status != http.StatusOK {
		errs = append(errs, fmt.Errorf("baseline app: GET / answered %d, want 200: %q", baseline.status, baseline.body))
	}
	if example.body != baseline.body {
		errs = append(errs, fmt.Errorf("bodies differ: example %q, baseline %q", example.body, baseline.body))
	}
	for _, h := range limitHeaders {
		if example.header.Get(h) == "" {
			errs = append(errs, fmt.Errorf("example app: GET / has no %s header", h))
		}
		if baseline.header.Get(h) != "" {
			errs = append(errs, fmt.Errorf("baseline app: GET / has a %s header", h))
		}
	}
	if got, want := example.header.Get("X-RateLimit-Limit"), strconv.Itoa(exampleLimit); got != "" && got != want {
		errs = append(errs, fmt.Errorf("example app: X-RateLimit-Limit %s, want %s", got, want))
	}
	return errors.Join(errs...)
}

// limitHeaderLines returns the example's rate-limit header lines, for the
// report.
func limitHeaderLines(p probe) []string {
	var lines []string
	for _, h := range limitHeaders {
		lines = append(lines, h+": "+p.header.Get(h))
	}
	return lines
}

// exampleArgs are the example apps' flags besides -addr: -metrics, so
// that the run can count the app's decisions, and -batch (the default)
// if batch, else -batch=false.
func exampleArgs(redisAddr string, o options, batch bool) []string {
	args := []string{
		"-redis", "redis://" + redisAddr,
		"-limit", strconv.Itoa(exampleLimit), "-period", "1m",
		"-algorithm", o.algorithm,
		// a Redis failure answers 503, which wrk counts, rather than
		// being decided in memory, which would be faster and unseen
		"-fail", "closed",
		"-metrics",
	}
	if o.appTimeout > 0 {
		args = append(args, "-timeout", o.appTimeout.String())
	}
	if batch {
		return append(args, "-batch")
	}
	return append(args, "-batch=false")
}

// decisions returns how many decisions the example app has counted: the
// sum of ratekit_decisions_total over its labels, on its /metrics.
func (a *app) decisions(ctx context.Context) (int64, error) {
	p, err := a.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	if p.status != http.StatusOK {
		return 0, fmt.Errorf("%s: GET /metrics answered %d", a.name, p.status)
	}
	n, err := parseDecisions(p.body)
	if err != nil {
		return 0, fmt.Errorf("%s: GET /metrics: %w", a.name, err)
	}
	return n, nil
}

// parseDecisions sums ratekit_decisions_total in a Prometheus text
// exposition.
func parseDecisions(text string) (int64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, err
	}
	f, ok := families["ratekit_decisions_total"]
	if !ok {
		return 0, errors.New("no ratekit_decisions_total")
	}
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return int64(n), nil
}

func baselineArgs(redisAddr string) []string {
	return []string{"-redis", "redis://" + redisAddr, "-period", "1m"}
}
