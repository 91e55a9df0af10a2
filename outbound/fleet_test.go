package outbound_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/internal/redistest"
)

// The fleet tests run four client processes (this test binary, re-run as a
// child) against one redis-server and a fake upstream in this process that
// allows exactly upstreamRate requests in any second (a sliding log) and
// answers 429 with Retry-After past it, and measure at the upstream.
const (
	upstreamRate = 50
	fleetSize    = 4
	budget       = time.Second // each request's timeout, its wait included
)

// fleetEnv opts in to the fleet runs. They measure timing at the upstream
// (turns per second, deadlines met, fairness), which another load on the
// machine moves, so they are not unit tests: the README's go test ./...
// leaves them out, and CI runs them in a step of their own with
// RATEKIT_FLEET=1 (.ci/run).
const fleetEnv = "RATEKIT_FLEET"

// fleetRun skips t unless the fleet runs were asked for.
func fleetRun(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process run of seconds")
	}
	if os.Getenv(fleetEnv) != "1" {
		t.Skip("a measurement of timing at an upstream, run on its own: set " + fleetEnv + "=1 to run it")
	}
}

// upstream is the fake upstream. Every arrival is logged with its client
// and deadline.
type upstream struct {
	mu          sync.Mutex
	limit       int
	closedUntil time.Time
	accepted    []time.Time // the sliding log: accepted arrivals, the last second's
	arrivals    []arrival
}

type arrival struct {
	at       time.Time
	client   int
	status   int
	deadline time.Time
	retry    time.Duration // the Retry-After of a 429
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	client, _ := strconv.Atoi(r.Header.Get("X-Client"))
	dl, _ := strconv.ParseInt(r.Header.Get(deadlineHeader), 10, 64)
	u.mu.Lock()
	a := arrival{at: now, client: client, status: http.StatusOK, deadline: time.Unix(0, dl)}
	i := 0
	for i < len(u.accepted) && !u.accepted[i].After(now.Add(-time.Second)) {
		i++
	}
	u.accepted = u.accepted[i:]
	switch {
	case now.Before(u.closedUntil):
		a.status, a.retry = http.StatusTooManyRequests, u.closedUntil.Sub(now)
	case len(u.accepted) >= u.limit:
		a.status, a.retry = http.StatusTooManyRequests, u.accepted[0].Add(time.Second).Sub(now)
	default:
		u.accepted = append(u.accepted, now)
	}
	u.arrivals = append(u.arrivals, a)
	u.mu.Unlock()
	if a.status != http.StatusOK {
		// whole seconds, rounded up, as Retry-After can say
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(a.retry.Seconds()))))
	}
	w.WriteHeader(a.status)
}

// close refuses everything for d from now; setLimit changes the limit.
func (u *upstream) close(d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closedUntil = time.Now().Add(d)
}

func (u *upstream) setLimit(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.limit = n
}

func (u *upstream) log() []arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.arrivals)
}

// fleet is one run: a redis-server, the upstream and the client processes.
type fleet struct {
	t     testing.TB
	redis *redistest.Server
	up    *upstream
	url   string
	start time.Time
	procs []*exec.Cmd
	outs  []string
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	u := &upstream{limit: upstreamRate}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return &fleet{t: t, redis: redistest.StartServer(t), up: u, url: srv.URL}
}

// launch starts the client processes, their load beginning a moment later.
func (f *fleet) launch(c childConfig) {
	f.t.Helper()
	f.start = time.Now().Add(500 * time.Millisecond)
	dir := f.t.TempDir()
	for id := range fleetSize {
		c.ID, c.Redis, c.Upstream, c.StartAt = id, f.redis.Addr(), f.url, f.start.UnixNano()
		c.Out = filepath.Join(dir, fmt.Sprintf("child%d.json", id))
		raw, _ := json.Marshal(c)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		f.procs, f.outs = append(f.procs, cmd), append(f.outs, c.Out)
	}
}

// at sleeps until d into the run.
func (f *fleet) at(d time.Duration) { time.Sleep(time.Until(f.start.Add(d))) }

// wait waits for every process still running and reads what each saw
// (nil for one killed).
func (f *fleet) wait() []*childResult {
	f.t.Helper()
	out := make([]*childResult, len(f.procs))
	for i, cmd := range f.procs {
		if err := cmd.Wait(); err != nil {
			continue // killed by the test, or failed: its result is missing
		}
		b, err := os.ReadFile(f.outs[i])
		if err != nil {
			f.t.Fatal(err)
		}
		out[i] = new(childResult)
		if err := json.Unmarshal(b, out[i]); err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}
