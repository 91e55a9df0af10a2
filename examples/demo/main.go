// Command demo shows, in under a minute and with no setup, why ratekit
// exists:
//
//	go run ./examples/demo
//
// It starts an embedded Redis (miniredis) and four replicas in this
// process, one per framework (net/http, Gin, Echo, Fiber), each on its own
// loopback port with its own Limiter, as separate gateway processes would
// be. Simulated clients send traffic through all of them, round-robin. The
// demo then:
//
//  1. shows that the replicas, sharing Redis, let exactly the global limit
//     through;
//  2. runs the same traffic through replicas that each count in memory, and
//     shows four times the limit getting through: the problem that shared
//     state solves;
//  3. stops Redis: every request is still answered, and each replica limits
//     locally (the default fail-local policy) with a quarter of the limit
//     (core.WithReplicas, rounded up), so the fleet stays near the global
//     limit: exactly at it here, where the limit divides by four and the
//     traffic is spread evenly;
//  4. brings Redis back, waits for the circuit breakers to close, and shows
//     the exact global limit again.
//
// -short (or DEMO_SHORT=1) runs a smaller version without pauses, in a few
// seconds. The demo exits 0 when every phase behaved as described, 1
// otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/serve"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// defaultRule is the demo's rule, named as the example apps name theirs.
const defaultRule = "default"

// settings size the demo.
type settings struct {
	clients   int           // simulated clients, each with its own address
	limit     int           // requests per client per hour, the global limit
	perClient int           // requests each client sends in a phase
	pace      time.Duration // pause between one client's requests
}

var (
	full  = settings{clients: 3, limit: 20, perClient: 80, pace: 30 * time.Millisecond}
	quick = settings{clients: 3, limit: 8, perClient: 32}
)

func main() {
	short := flag.Bool("short", os.Getenv("DEMO_SHORT") == "1", "a smaller run without pauses, in a few seconds (env DEMO_SHORT=1)")
	flag.Parse()
	s := full
	if *short {
		s = quick
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Stdout, isTerminal(os.Stdout), s)
	stop()
	os.Exit(code)
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// isTerminal reports whether f is a terminal, where progress bars redraw.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// demo is one run's state.
type demo struct {
	ctx    context.Context
	out    io.Writer
	tty    bool
	s      settings
	rules  []core.Rule
	client *http.Client
	errors atomic.Int64 // failed store calls, over all replicas
	failed []string     // checks that did not hold
}

// run runs the demo, printing to out, and returns the exit status.
func run(ctx context.Context, out io.Writer, tty bool, s settings) int {
	redis.SetLogger(quiet{}) // the demo reports Redis's outage itself
	d := &demo{
		ctx: ctx, out: out, tty: tty, s: s,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
	}
	defer d.client.CloseIdleConnections()
	if err := d.run(); err != nil {
		fmt.Fprintf(out, "\ndemo failed: %v\n", err)
		return 1
	}
	if len(d.failed) > 0 {
		fmt.Fprintf(out, "\nSomething did not behave as described:\n  %s\n", strings.Join(d.failed, "\n  "))
		return 1
	}
	return 0
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *demo) run() error {
	// The replicas stand behind a load balancer on this host, which they
	// trust to say who the client is in X-Forwarded-For.
	clientIP, err := keyfuncs.IP(keyfuncs.TrustedProxies(netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")))
	if err != nil {
		return err
	}
	d.rules = []core.Rule{{Name: defaultRule, Limit: core.PerHour(d.s.limit), Key: clientIP}} // GCRA

	d.printf("ratekit demo: one rate limit, held exactly across replicas\n\n")
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("start the embedded Redis: %w", err)
	}
	defer mr.Close()
	d.printf("  Redis     embedded miniredis on %s\n", mr.Addr())

	shared, err := d.startFleet(func(opts ...core.Option) (*core.Limiter, func(), error) {
		rdb := redis.NewClient(&redis.Options{
			Addr:                  mr.Addr(),
			ContextTimeoutEnabled: true, // the Limiter's deadline holds
			MaxRetries:            -1,   // the breaker decides when to try again,
			DialerRetries:         1,    // not the client
		})
		store, err := redisstore.New(rdb)
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		l, err := core.NewLimiter(store, append(opts,
			core.WithReplicas(len(frameworks)), // during an outage, each counts a quarter
			// The demo's Redis shares this process's CPU with the clients
			// and three other replicas; a service keeps the 50 ms default.
			core.WithTimeout(serve.StoreTimeout),
			core.OnError(func(error) { d.errors.Add(1) }),
		)...)
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return l, func() { rdb.Close() }, nil
	})
	if err != nil {
		return err
	}
	defer shared.stop()
	for i, r := range shared.replicas {
		label := "Replicas"
		if i > 0 {
			label = ""
		}
		d.printf("  %-9s %-9s %s\n", label, r.name, r.url)
	}
	d.printf("  Limit     %d requests per client per hour (rule %q, GCRA), keyed by client IP\n", d.s.limit, defaultRule)
	d.printf("  Traffic   %d clients, %d requests each, spread round-robin over the replicas by a\n", d.s.clients, d.s.perClient)
	d.printf("            load balancer that the replicas trust to set X-Forwarded-For\n")
	global := d.s.clients * d.s.limit

	// 1. Shared state: exactly the limit.
	d.phase(1, "Every replica checks the shared limit in Redis")
	st, err := d.traffic(shared.replicas, 1)
	if err != nil {
		return err
	}
	d.table(shared.replicas, st)
	d.verdict(st, global, "exactly the global limit got through, whichever replica answered")

	// 2. Per-replica memory: N times the limit.
	d.phase(2, "The same traffic, each replica counting in its own memory")
	local, err := d.startFleet(func(opts ...core.Option) (*core.Limiter, func(), error) {
		store, err := memorystore.New()
		if err != nil {
			return nil, nil, err
		}
		l, err := core.NewLimiter(store, opts...)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		return l, func() { store.Close() }, nil
	})
	if err != nil {
		return err
	}
	st, err = d.traffic(local.replicas, 2)
	d.table(local.replicas, st)
	local.stop()
	if err != nil {
		return err
	}
	allowed := st.total().allowed
	d.printf("  %.1fx the global limit got through: each replica saw only its share of the traffic\n", float64(allowed)/float64(global))
	if want := min(d.s.perClient, len(frameworks)*d.s.limit) * d.s.clients; allowed != want {
		d.fail("in memory: %d allowed, want %d", allowed, want)
	}

	// 3. Redis down: fail local.
	d.phase(3, "Redis stops: each replica limits locally (fail local)")
	mr.Close()
	d.printf("  Redis stopped.\n")
	d.errors.Store(0)
	st, err = d.traffic(shared.replicas, 3)
	if err != nil {
		return err
	}
	d.table(shared.replicas, st)
	open := 0
	for _, r := range shared.replicas {
		if core.BreakerState(r.breaker.Load()) != core.BreakerClosed {
			open++
		}
	}
	per := (d.s.limit + len(frameworks) - 1) / len(frameworks)
	d.printf("  Every request was answered. Each replica's circuit breaker opened after a few failed\n")
	d.printf("  store calls (%d of %d are open; %d calls failed in all, probes included), and from then\n", open, len(frameworks), d.errors.Load())
	d.printf("  on no request waited for Redis. Each replica let %d per client through: the limit / %d,\n", per, len(frameworks))
	d.printf("  rounded up, as core.WithReplicas(%d) asks. So the fleet holds near the global limit:\n", len(frameworks))
	if per*len(frameworks) == d.s.limit {
		d.printf("  exactly it here, as %d divides by %d and the load balancer spreads each client's\n", d.s.limit, len(frameworks))
		d.printf("  requests evenly. Uneven traffic lets less through, and a share rounded up more.\n")
	} else {
		d.printf("  %d per client here, as each share is rounded up. Uneven traffic lets less through.\n", per*len(frameworks))
	}
	if want := per * len(frameworks) * d.s.clients; st.total().allowed != want || st.total().other != 0 {
		d.fail("Redis down: %d allowed and %d other answers, want %d and 0", st.total().allowed, st.total().other, want)
	}
	if open != len(frameworks) {
		d.fail("Redis down: %d breakers open, want %d", open, len(frameworks))
	}

	// 4. Redis back: exact again.
	d.phase(4, "Redis is back")
	if err := mr.Restart(); err != nil {
		return fmt.Errorf("restart the embedded Redis: %w", err)
	}
	begin := time.Now()
	if err := d.waitClosed(shared.replicas, 15*time.Second); err != nil {
		return err
	}
	d.printf("  Redis restarted; every circuit breaker closed after %v.\n", roundDuration(time.Since(begin)))
	st, err = d.traffic(shared.replicas, 4)
	if err != nil {
		return err
	}
	d.table(shared.replicas, st)
	d.verdict(st, global, "exactly the global limit again")

	d.printf("\nOne limit, shared through Redis, holds across any mix of frameworks and replicas;\n")
	d.printf("counted apart, it multiplies by the number of replicas. Next: go run ./examples/gin\n")
	return nil
}

// fleet is one replica per framework.
type fleet struct {
	replicas []*replica
	closers  []func()
	client   *http.Client
}

// startFleet starts one replica per framework, each over a Limiter of its
// own from newLimiter.
func (d *demo) startFleet(newLimiter func(opts ...core.Option) (*core.Limiter, func(), error)) (*fleet, error) {
	f := &fleet{client: d.client}
	for _, fw := range frameworks {
		brk := new(atomic.Int32) // the replica's breaker state, as its Limiter reports it
		l, closer, err := newLimiter(core.OnBreakerChange(func(_, to core.BreakerState) { brk.Store(int32(to)) }))
		if err != nil {
			f.stop()
			return nil, err
		}
		f.closers = append(f.closers, closer)
		r, err := startReplica(fw, l, d.rules)
		if err != nil {
			l.Close()
			f.stop()
			return nil, err
		}
		r.breaker = brk
		f.replicas = append(f.replicas, r)
	}
	return f, nil
}

// stop stops the replicas and closes their limiters and clients.
func (f *fleet) stop() {
	// Connections the client opened but never used would hold each
	// server's graceful shutdown for seconds.
	f.client.CloseIdleConnections()
	for _, r := range f.replicas {
		_ = r.stop()
	}
	for _, c := range f.closers {
		c()
	}
	f.replicas, f.closers = nil, nil
}

// count is one replica's answers in a phase.
type count struct {
	allowed, denied, other int
	slowest                time.Duration
}

// stats holds a phase's answers, one count per replica.
type stats []count

func (s stats) total() count {
	var t count
	for _, c := range s {
		t.allowed += c.allowed
		t.denied += c.denied
		t.other += c.other
		t.slowest = max(t.slowest, c.slowest)
	}
	return t
}

// traffic sends every client's requests round-robin over replicas, each
// client from an address of its own for the phase, and counts the answers.
func (d *demo) traffic(replicas []*replica, phase int) (stats, error) {
	var (
		mu    sync.Mutex
		st    = make(stats, len(replicas))
		live  tally
		wg    sync.WaitGroup
		first error
	)
	total := int64(d.s.clients * d.s.perClient)
	done := d.progress(&live, total)
	begin := time.Now()
	for c := range d.s.clients {
		ip := fmt.Sprintf("203.0.113.%d", phase*10+c+1)
		wg.Go(func() {
			for i := range d.s.perClient {
				if d.ctx.Err() != nil {
					return
				}
				ri := (i + c) % len(replicas)
				status, took, err := d.get(replicas[ri].url+"/", ip)
				live.sent.Add(1)
				switch status {
				case http.StatusOK:
					live.allowed.Add(1)
				case http.StatusTooManyRequests:
					live.denied.Add(1)
				}
				mu.Lock()
				cnt := &st[ri]
				switch {
				case err != nil:
					cnt.other++
					if first == nil {
						first = err
					}
				case status == http.StatusOK:
					cnt.allowed++
				case status == http.StatusTooManyRequests:
					cnt.denied++
				default:
					cnt.other++
				}
				cnt.slowest = max(cnt.slowest, took)
				mu.Unlock()
				if d.s.pace > 0 {
					select {
					case <-time.After(d.s.pace):
					case <-d.ctx.Done():
					}
				}
			}
		})
	}
	wg.Wait()
	done()
	if err := d.ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted")
	}
	if first != nil {
		return nil, fmt.Errorf("a request failed: %w", first)
	}
	d.printf("  Sent %d requests in %v; the slowest answer took %v.\n\n", total,
		roundDuration(time.Since(begin)), roundDuration(st.total().slowest))
	return st, nil
}

// get requests url as the client at ip, behind the load balancer.
func (d *demo) get(url, ip string) (status int, took time.Duration, err error) {
	req, err := http.NewRequestWithContext(d.ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-Forwarded-For", ip)
	begin := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(begin), nil
}

// tally counts a phase's answers as they come, for the progress bar.
type tally struct{ sent, allowed, denied atomic.Int64 }

// progress draws a progress bar on a terminal until the returned function
// is called; elsewhere it draws nothing.
func (d *demo) progress(live *tally, total int64) (done func()) {
	if !d.tty {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	draw := func() {
		const width = 40
		n := live.sent.Load()
		bar := strings.Repeat("#", int(n*width/total)) + strings.Repeat(".", width-int(n*width/total))
		d.printf("\r  [%s] %d/%d requests: %d allowed, %d denied", bar, n, total, live.allowed.Load(), live.denied.Load())
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				draw()
			case <-stop:
				draw()
				d.printf("\r\033[K")
				return
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// roundDuration rounds d to three significant digits or so, for reading.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// phase prints a phase's heading.
func (d *demo) phase(n int, title string) {
	d.printf("\n%d/4  %s\n\n", n, title)
}

// table prints a phase's answers per replica and in total.
func (d *demo) table(replicas []*replica, st stats) {
	d.printf("  %-10s %-24s %8s %8s\n", "replica", "address", "allowed", "denied")
	for i, r := range replicas {
		d.printf("  %-10s %-24s %8d %8d\n", r.name, strings.TrimPrefix(r.url, "http://"), st[i].allowed, st[i].denied)
	}
	t := st.total()
	d.printf("  %-10s %-24s %8d %8d    global limit: %d clients x %d = %d\n",
		"total", "", t.allowed, t.denied, d.s.clients, d.s.limit, d.s.clients*d.s.limit)
	if t.other > 0 {
		d.printf("  %d answers were neither 200 nor 429\n", t.other)
	}
}

// verdict prints whether exactly want requests got through, and records a
// failed check if not.
func (d *demo) verdict(st stats, want int, ok string) {
	t := st.total()
	if t.allowed == want && t.other == 0 {
		d.printf("  OK: %s.\n", ok)
		return
	}
	d.printf("  NOT OK: %d allowed, want %d.\n", t.allowed, want)
	d.fail("%d allowed and %d other answers, want %d and 0", t.allowed, t.other, want)
}

func (d *demo) fail(format string, args ...any) {
	d.failed = append(d.failed, fmt.Sprintf(format, args...))
}

// waitClosed waits until every replica's circuit breaker has closed.
func (d *demo) waitClosed(replicas []*replica, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		closed := 0
		for _, r := range replicas {
			if core.BreakerState(r.breaker.Load()) == core.BreakerClosed {
				closed++
			}
		}
		if closed == len(replicas) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d circuit breakers still open %v after Redis came back", len(replicas)-closed, len(replicas), timeout)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-d.ctx.Done():
			return fmt.Errorf("interrupted")
		}
	}
}
