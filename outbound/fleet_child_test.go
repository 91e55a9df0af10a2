package outbound_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/outbound"
)

// childEnv names the environment variable that makes the test binary a
// client process of the fleet tests: it holds the process's childConfig.
const childEnv = "OUTBOUND_FLEET_CHILD"

// childConfig is what one client process of a fleet test does.
type childConfig struct {
	ID       int
	Redis    string
	Upstream string
	Rate     int           // the Limit, per second
	AIMD     bool          // adaptation on
	Open     float64       // open loop: arrivals per second, paced with jitter; 0 for closed
	Workers  int           // closed loop: requests in flight, each after Think
	Think    time.Duration // closed loop: the pause after each answer
	StartAt  int64         // unix ns the load starts at
	Duration time.Duration // how long requests are started
	Timeout  time.Duration // each request's budget, its wait included
	Out      string        // where to write the childResult
}

// childResult is what a client process saw.
type childResult struct {
	Waits   []time.Duration // of the requests sent, from start to being sent
	Sent    int
	Status  map[int]int
	GaveUp  int
	Errors  int
	LastErr string
	// LastDegraded and LastOnRedis are when (Unix ns) the process was last
	// granted a turn by its share of the rate, without Redis, and by
	// Redis; 0 for never.
	LastDegraded, LastOnRedis int64
}

// deadlineHeader carries each request's deadline to the upstream, which
// checks that nothing arrives after it.
const deadlineHeader = "X-Deadline"

// stamp is the client's last transport: it stamps the deadline and the
// client, and records when the limiter let the request go.
type stamp struct {
	id   int
	base http.RoundTripper
}

type sentAtKey struct{}

func (s stamp) RoundTrip(req *http.Request) (*http.Response, error) {
	if p, ok := req.Context().Value(sentAtKey{}).(*time.Time); ok {
		*p = time.Now()
	}
	r := req.Clone(req.Context())
	if d, ok := req.Context().Deadline(); ok {
		r.Header.Set(deadlineHeader, strconv.FormatInt(d.UnixNano(), 10))
	}
	r.Header.Set("X-Client", strconv.Itoa(s.id))
	return s.base.RoundTrip(r)
}

// runChild is the body of a client process.
func runChild(raw string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	redis.SetLogger(quiet{}) // a dead Redis is the point of some runs
	rdb := redis.NewClient(&redis.Options{
		Addr: c.Redis, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 50 * time.Millisecond, DialerRetries: 1,
	})
	defer rdb.Close()
	var opts []outbound.Option
	if c.AIMD {
		opts = append(opts, outbound.WithAIMD(outbound.AIMD{}))
	}
	turns := &turnObserver{debugObserver: debugObserver{c.ID, time.Unix(0, c.StartAt), os.Getenv("OUTBOUND_DEBUG") != ""}}
	opts = append(opts, outbound.WithObserver(turns))
	l, err := outbound.New(rdb, "fleet", outbound.PerSecond(c.Rate), opts...)
	if err != nil {
		return err
	}
	defer l.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 256}
	client := &http.Client{Transport: &outbound.Transport{Limiter: l, Base: stamp{c.ID, base}}}
	res := load(c, client)
	res.LastDegraded, res.LastOnRedis = turns.lastDegraded.Load(), turns.lastOnRedis.Load()
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(c.Out, b, 0o644)
}

// load runs c's requests and collects what they saw.
func load(c childConfig, client *http.Client) *childResult {
	res := &childResult{Status: map[int]int{}}
	var mu sync.Mutex
	one := func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		defer cancel()
		start := time.Now()
		var sentAt time.Time
		ctx = context.WithValue(ctx, sentAtKey{}, &sentAt)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Upstream, nil)
		resp, err := client.Do(req)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(err, outbound.ErrWouldExceedDeadline):
			res.GaveUp++
		case err != nil:
			res.Errors++
			res.LastErr = err.Error()
		default:
			resp.Body.Close()
			res.Sent++
			res.Status[resp.StatusCode]++
			res.Waits = append(res.Waits, sentAt.Sub(start))
		}
	}
	time.Sleep(time.Until(time.Unix(0, c.StartAt)))
	end := time.Now().Add(c.Duration)
	var wg sync.WaitGroup
	if c.Open > 0 {
		// paced arrivals, each gap drawn within ±50% of the mean: equal
		// demands, and no process locked in step with the turns
		rng := rand.New(rand.NewPCG(uint64(c.ID), uint64(c.StartAt)))
		every := float64(time.Second) / c.Open
		jittered := func() time.Duration { return time.Duration(every * (0.5 + rng.Float64())) }
		for next := time.Now().Add(jittered()); next.Before(end); next = next.Add(jittered()) {
			time.Sleep(time.Until(next))
			wg.Go(one)
		}
	} else {
		for range c.Workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					one()
					time.Sleep(c.Think)
				}
			})
		}
	}
	wg.Wait()
	return res
}

// mustChild runs the test binary as a client process when asked to.
func mustChild() {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return
	}
	if err := runChild(raw); err != nil {
		fmt.Fprintln(os.Stderr, "fleet child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

type debugObserver struct {
	id    int
	start time.Time
	on    bool // print; set by OUTBOUND_DEBUG
}

func (d debugObserver) p(f string, a ...any) {
	if !d.on {
		return
	}
	fmt.Fprintf(os.Stderr, "%d %6.3f "+f+"\n", append([]any{d.id, time.Since(d.start).Seconds()}, a...)...)
}
func (debugObserver) Waited(outbound.WaitEvent)   {}
func (debugObserver) QueueChanged(string, int)    {}
func (d debugObserver) Throttled(_ string, s int) { d.p("throttled %d", s) }
func (d debugObserver) Paused(_ string, p time.Duration, r string) {
	d.p("paused %v %s", p, r)
}
func (d debugObserver) RateChanged(_ string, r float64)                 { d.p("rate %.2f", r) }
func (debugObserver) RedisCalled(string, time.Duration, error)          {}
func (d debugObserver) BreakerChanged(_ string, f, t core.BreakerState) { d.p("breaker %v->%v", f, t) }

// turnObserver records when the process was last granted a turn with
// Redis and without it, and prints what debugObserver prints.
type turnObserver struct {
	debugObserver
	lastDegraded, lastOnRedis atomic.Int64
}

func (o *turnObserver) Waited(e outbound.WaitEvent) {
	if e.Outcome != outbound.OutcomeGranted {
		return
	}
	if e.Degraded {
		o.lastDegraded.Store(time.Now().UnixNano())
	} else {
		o.lastOnRedis.Store(time.Now().UnixNano())
	}
}
