// Command outbound sends requests to an upstream through ratekit's
// outbound throttle, so that every process running it against one Redis
// stays under the upstream's limit together, each request waiting for its
// turn instead of failing.
//
//	go run ./examples/outbound -upstream http://127.0.0.1:9000/ -rate 50 -requests 200
//
// Every request is a GET of -upstream, keyed by its host: every process
// given the same -redis shares one schedule of -rate per -period. An
// upstream's 429 with Retry-After pauses the whole fleet, not one process.
// When all -requests are done it prints one JSON line and exits 0:
//
//	{"sent":200,"ok":200,"throttled":0,"errors":0,"gave_up":0,"wait_p50_ms":1,"wait_p99_ms":3}
//
// sent counts the requests that reached the upstream, ok its 2xx answers,
// throttled its 429s, errors the requests that failed otherwise, gave_up
// those whose turn would have come after their deadline (-timeout, the
// whole budget of a request, its wait included), and the waits are those
// of the requests sent. Without -redis it runs on an embedded miniredis.
// A Redis call that misses -redis-timeout counts as Redis down: the
// request then waits for this process's share of the rate (-fleet), and
// fails if the process knows none.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/outbound"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// config is what the flags say.
type config struct {
	upstream    string
	rate        int
	period      time.Duration
	redis       string
	requests    int
	concurrency int
	timeout     time.Duration
	redisWait   time.Duration
	aimd        bool
	fleet       int
}

// parse reads the flags; a bad value is an error naming it.
func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("outbound", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.upstream, "upstream", "", "the `URL` every request GETs (required)")
	fs.IntVar(&c.rate, "rate", 10, "requests per -period, shared by every process on -redis")
	fs.DurationVar(&c.period, "period", time.Second, "the period of -rate")
	fs.StringVar(&c.redis, "redis", "", "Redis `URL`, such as redis://localhost:6379/0 (default: an embedded miniredis)")
	fs.IntVar(&c.requests, "requests", 100, "how many requests to send")
	fs.IntVar(&c.concurrency, "concurrency", 4, "requests in flight at once")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "each request's whole budget, its wait included")
	fs.DurationVar(&c.redisWait, "redis-timeout", outbound.DefaultTimeout, "the deadline of each Redis call; a call that misses it counts as Redis down")
	fs.BoolVar(&c.aimd, "aimd", false, "lower the shared rate when the upstream answers 429, and raise it back")
	fs.IntVar(&c.fleet, "fleet", 0, "processes sharing the rate, for each one's share while Redis is down (default: learned)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	u, err := url.Parse(c.upstream)
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.upstream == "" || err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return c, fmt.Errorf("-upstream %q: want an http or https URL", c.upstream)
	case c.requests < 0:
		return c, fmt.Errorf("-requests %d: want at least 0", c.requests)
	case c.concurrency < 1:
		return c, fmt.Errorf("-concurrency %d: want at least 1", c.concurrency)
	case c.timeout <= 0:
		return c, fmt.Errorf("-timeout %v: want a positive duration", c.timeout)
	case c.redisWait <= 0:
		return c, fmt.Errorf("-redis-timeout %v: want a positive duration", c.redisWait)
	case c.fleet < 0:
		return c, fmt.Errorf("-fleet %d: want at least 0", c.fleet)
	}
	if err := (outbound.Limit{Rate: c.rate, Period: c.period}).Validate(); err != nil {
		return c, fmt.Errorf("-rate %d -period %v: %w", c.rate, c.period, err)
	}
	return c, nil
}

// run runs the app and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 2
	}
	rdb, stop, err := openRedis(c.redis)
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 1
	}
	defer stop()
	opts := []outbound.Option{outbound.WithTimeout(c.redisWait)}
	if c.aimd {
		opts = append(opts, outbound.WithAIMD(outbound.AIMD{}))
	}
	if c.fleet > 0 {
		opts = append(opts, outbound.WithFleetSize(c.fleet))
	}
	l, err := outbound.New(rdb, "upstream", outbound.Limit{Rate: c.rate, Period: c.period}, opts...)
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 1
	}
	defer l.Close()
	client := &http.Client{Transport: &outbound.Transport{Limiter: l, Base: &sendTimer{base: http.DefaultTransport}}}
	line, _ := json.Marshal(send(c, client))
	fmt.Fprintln(stdout, string(line))
	return 0
}

// openRedis connects to the Redis of url, or starts an embedded miniredis.
func openRedis(u string) (*redis.Client, func(), error) {
	if u == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, nil, fmt.Errorf("start the embedded miniredis: %w", err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		return rdb, func() { rdb.Close(); mr.Close() }, nil
	}
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return nil, nil, fmt.Errorf("-redis: %w", err)
	}
	opts.ContextTimeoutEnabled = true // the throttle's deadline holds
	opts.MaxRetries = -1              // the breaker decides when to try again
	rdb := redis.NewClient(opts)
	return rdb, func() { rdb.Close() }, nil
}

// report is the JSON line.
type report struct {
	Sent      int64 `json:"sent"`
	OK        int64 `json:"ok"`
	Throttled int64 `json:"throttled"`
	Errors    int64 `json:"errors"`
	GaveUp    int64 `json:"gave_up"`
	WaitP50   int64 `json:"wait_p50_ms"`
	WaitP99   int64 `json:"wait_p99_ms"`
}

// sendTimer notes when the throttle let a request go, for its wait.
type sendTimer struct{ base http.RoundTripper }

type startKey struct{}

// started is a request's start and, once sent, its wait.
type started struct {
	at   time.Time
	wait time.Duration
}

func (s *sendTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	if st, ok := req.Context().Value(startKey{}).(*started); ok && st.wait == 0 {
		st.wait = max(time.Since(st.at), time.Nanosecond)
	}
	return s.base.RoundTrip(req)
}

// send sends c.requests GETs of c.upstream, c.concurrency at a time.
func send(c config, client *http.Client) report {
	var r report
	var mu sync.Mutex
	var waits []time.Duration
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c.concurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(c.requests) {
				wait, status, err := one(c, client)
				mu.Lock()
				switch {
				case errors.Is(err, outbound.ErrWouldExceedDeadline):
					r.GaveUp++
				case err != nil:
					r.Errors++
				default:
					r.Sent++
					waits = append(waits, wait)
					if status == http.StatusTooManyRequests {
						r.Throttled++
					} else if status >= 200 && status < 300 {
						r.OK++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(waits)
	if n := len(waits); n > 0 {
		r.WaitP50 = waits[(n-1)/2].Milliseconds()
		r.WaitP99 = waits[(n-1)*99/100].Milliseconds()
	}
	return r
}

// one sends one request and returns its wait and status.
func one(c config, client *http.Client) (time.Duration, int, error) {
	st := &started{at: time.Now()}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), startKey{}, st), c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.upstream, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return st.wait, resp.StatusCode, nil
}
