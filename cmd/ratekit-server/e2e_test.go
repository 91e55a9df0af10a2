//go:build linux

package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratekit-server")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ratekit-server")
	// RATEKIT_SERVER_BIN runs the tests against a server built apart (to
	// measure one build against another); by default they build this one
	if b := os.Getenv("RATEKIT_SERVER_BIN"); b != "" {
		binary = b
	} else if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// start starts a ratekit-server on files (written under a fresh runtime
// root) with env.
func start(t *testing.T, dir string, env map[string]string) *proctest.Proc {
	t.Helper()
	e := proctest.RuntimeEnv(dir)
	for k, v := range env {
		e[k] = v
	}
	p, err := proctest.Start("ratekit", binary, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("server log:\n%s", p.Log())
		}
	})
	return p
}

func descriptor(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// awaitWindow waits until the current window of length window (a minute,
// an hour: envoy's counting windows, aligned to the clock) has room for
// within.
func awaitWindow(window, within time.Duration) {
	now := time.Now()
	if left := now.Truncate(window).Add(window).Sub(now); left < within+time.Second {
		time.Sleep(left + 200*time.Millisecond)
	}
}

// conns dials n connections to each address.
func conns(t *testing.T, n int, addrs ...string) []rlspb.RateLimitServiceClient {
	t.Helper()
	var out []rlspb.RateLimitServiceClient
	for _, a := range addrs {
		for range n {
			c, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			out = append(out, rlspb.NewRateLimitServiceClient(c))
		}
	}
	return out
}

const exactConfig = `
domain: exact
descriptors:
  - key: compatible
    rate_limit: {unit: minute, requests_per_unit: 100}
  # GCRA frees a unit every period/100: per hour that is 36 s, which no
  # burst of 400 calls on a loaded machine lasts, where per minute one
  # burst of 0.86 s let a 101st through, as GCRA must
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: gcra}
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: fixed}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding-log}
`

// burst sends total concurrent requests for d, spread over clients, and
// returns how many were allowed, denied and failed.
func burst(clients []rlspb.RateLimitServiceClient, total int, d *rlv3.RateLimitDescriptor) (ok, over, failed int64) {
	var wg sync.WaitGroup
	var okN, overN, failN atomic.Int64
	startGate := make(chan struct{})
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := clients[i%len(clients)].ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "exact", Descriptors: []*rlv3.RateLimitDescriptor{d}})
			switch {
			case err != nil:
				failN.Add(1)
			case r.GetOverallCode() == rlspb.RateLimitResponse_OK:
				okN.Add(1)
			default:
				overN.Add(1)
			}
		}()
	}
	close(startGate)
	wg.Wait()
	return okN.Load(), overN.Load(), failN.Load()
}

// TestExact sends 400 concurrent requests on one descriptor of 100 per
// minute (per hour under GCRA), over several connections, to one server
// and to two replicas sharing a redis-server: exactly 100 pass, for envoy's
// counting and for ratekit's algorithms.
func TestExact(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"exact.yaml": exactConfig})
	// a deadline no loaded machine misses: a call past the default 50 ms
	// goes to the local fallback, exact per replica only
	env := map[string]string{"REDIS_URL": rs.Addr(), "RATEKIT_TIMEOUT": "2s"}
	a := start(t, dir, env)
	b := start(t, dir, env)
	for _, tc := range []struct {
		name    string
		clients []rlspb.RateLimitServiceClient
	}{
		{"one-server", conns(t, 4, a.GRPC)},
		{"two-replicas", conns(t, 4, a.GRPC, b.GRPC)},
	} {
		for _, key := range []string{"compatible", "gcra", "fixed", "sliding"} {
			t.Run(tc.name+"/"+key, func(t *testing.T) {
				awaitWindow(time.Minute, 5*time.Second)
				ok, over, failed := burst(tc.clients, 400, descriptor(key, tc.name))
				if ok != 100 || over != 300 || failed != 0 {
					c := rs.Client(t)
					keys, _ := c.Keys(context.Background(), "*").Result()
					for _, k := range keys {
						v, _ := c.Get(context.Background(), k).Result()
						ttl, _ := c.PTTL(context.Background(), k).Result()
						t.Logf("%s = %s (%v)", k, v, ttl)
					}
					t.Fatalf("allowed %d, denied %d, failed %d; want 100, 300, 0", ok, over, failed)
				}
			})
		}
	}
}

// writeFile replaces a file atomically, as a configuration tool would.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// traffic calls ShouldRateLimit with d from workers goroutines until
// stopped, and counts answers by code, errors and the slowest answer.
type traffic struct {
	ok, over, failed atomic.Int64
	slowest          atomic.Int64 // ns
	firstErr         atomic.Value
	stop             chan struct{}
	once             sync.Once
	wg               sync.WaitGroup
}

func runTraffic(clients []rlspb.RateLimitServiceClient, workers int, mk func(i int) *rlspb.RateLimitRequest) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for w := range workers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				t0 := time.Now()
				r, err := clients[w%len(clients)].ShouldRateLimit(ctx, mk(w*1_000_000+i))
				cancel()
				d := int64(time.Since(t0))
				for {
					s := tr.slowest.Load()
					if d <= s || tr.slowest.CompareAndSwap(s, d) {
						break
					}
				}
				switch {
				case err != nil:
					tr.failed.Add(1)
					tr.firstErr.CompareAndSwap(nil, err.Error())
				case r.GetOverallCode() == rlspb.RateLimitResponse_OK:
					tr.ok.Add(1)
				default:
					tr.over.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return tr
}

// end stops the traffic and waits for it; later calls do nothing.
func (tr *traffic) end() {
	tr.once.Do(func() { close(tr.stop) })
	tr.wg.Wait()
}

func (tr *traffic) String() string {
	return fmt.Sprintf("ok %d, over %d, failed %d (first error %v), slowest %v",
		tr.ok.Load(), tr.over.Load(), tr.failed.Load(), tr.firstErr.Load(), time.Duration(tr.slowest.Load()))
}

// eventually polls cond every 20 ms until within has passed.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

// TestReloadUnderTraffic changes the files while requests flow: the new
// limits apply within two seconds, a broken file is refused with its file
// and line while the last good configuration stays, and no request fails.
func TestReloadUnderTraffic(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n"})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr(), "LOG_LEVEL": "info"})
	clients := conns(t, 2, p.GRPC)
	tr := runTraffic(clients, 4, func(i int) *rlspb.RateLimitRequest {
		return &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("k", fmt.Sprint(i%50))}}
	})
	defer tr.end()
	file := filepath.Join(dir, "ratelimit", "config", "a.yaml")
	probe := func(domain, key string) rlspb.RateLimitResponse_Code {
		r, err := clients[0].ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlv3.RateLimitDescriptor{descriptor(key, "probe")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Statuses) == 1 && r.Statuses[0].CurrentLimit != nil {
			return rlspb.RateLimitResponse_OVER_LIMIT // limited: marked for the check below
		}
		return r.GetOverallCode()
	}
	writeFile(t, file, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n  - key: added\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	took := eventually(t, 2*time.Second, "a new descriptor applied", func() bool { return probe("d", "added") == rlspb.RateLimitResponse_OVER_LIMIT })
	t.Logf("change applied after %v", took)
	writeFile(t, file, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minutes, requests_per_unit: 1}\n")
	eventually(t, 3*time.Second, "the broken file logged", func() bool { return strings.Contains(p.Log(), "a.yaml:4: invalid rate limit unit 'minutes'") })
	if probe("d", "added") != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatal("the last good configuration did not stay")
	}
	if code, body, _ := proctest.Get(p.HTTP, "/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("healthcheck %d %q with a broken file", code, body)
	}
	// a second file in the directory, another domain
	writeFile(t, filepath.Join(dir, "ratelimit", "config", "b.yaml"), "domain: e\ndescriptors:\n  - key: x\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	writeFile(t, file, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n")
	eventually(t, 2*time.Second, "the fixed file and a second file applied", func() bool {
		return probe("e", "x") == rlspb.RateLimitResponse_OVER_LIMIT && probe("d", "added") == rlspb.RateLimitResponse_OK
	})
	tr.end()
	if tr.failed.Load() != 0 || tr.ok.Load() == 0 {
		t.Fatalf("traffic during reloads: %v", tr)
	}
	t.Logf("traffic: %v", tr)
}
