package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
	"github.com/ratekit/ratekit/bench/internal/serverproc"
)

const (
	exactProcesses  = 4
	exactGoroutines = 64
	exactLimit      = 1000
	// exactStartDelay gives the children time to start and connect, so
	// that they begin together.
	exactStartDelay = 500 * time.Millisecond
	// exactMargin is the least time left in a minute, beyond the longest
	// a check may take, for a check of clock-aligned windows to begin.
	exactMargin = 3 * time.Second
)

// exactPlan returns how many calls each process makes at most (a few times
// the limit in all), and the longest a check may take.
func exactPlan(quick bool) (attemptsPerProcess int64, maxTime time.Duration) {
	if quick {
		return exactGoroutines * 5, 5 * time.Second
	}
	return exactGoroutines * 24, 10 * time.Second
}

// childFlags are the hidden flags of a child process of the exactness check.
type childFlags struct {
	name     string
	addr     string
	key      string
	start    int64 // unix ns: when to begin
	deadline int64 // unix ns: when to give up
	attempts int64
}

func (f *childFlags) register() {
	flag.StringVar(&f.name, "exact-child", "", "(internal) run as a child of the exactness check, for this contender")
	flag.StringVar(&f.addr, "exact-addr", "", "(internal)")
	flag.StringVar(&f.key, "exact-key", "", "(internal)")
	flag.Int64Var(&f.start, "exact-start", 0, "(internal)")
	flag.Int64Var(&f.deadline, "exact-deadline", 0, "(internal)")
	flag.Int64Var(&f.attempts, "exact-attempts", 0, "(internal)")
}

// childResult is what a child prints, as JSON, on standard output.
type childResult struct {
	Attempts, Allowed, Denied, Errors int64
	FirstErr                          string
	Begin, End                        int64 // unix ns around its decisions
}

// runChild makes f.attempts decisions on one key from 64 goroutines, under
// a limit of 1000 per minute, starting at f.start, and reports the counts.
func runChild(f childFlags) error {
	c, err := find(f.name)
	if err != nil {
		return err
	}
	ctx := context.Background()
	client := newClient(f.addr, exactGoroutines)
	defer client.Close()
	open, err := c.open(ctx, client, exactLimit)
	if err != nil {
		return err
	}
	// connect every goroutine's connection before the common start
	if err := warmPool(ctx, client, exactGoroutines); err != nil {
		return err
	}
	time.Sleep(time.Until(time.Unix(0, f.start)))
	var stop atomic.Bool
	t := time.AfterFunc(time.Until(time.Unix(0, f.deadline)), func() { stop.Store(true) })
	defer t.Stop()
	begin := time.Now()
	r := run(open, singleKey(f.key), 0, exactGoroutines, f.attempts, nil, &stop)
	end := time.Now()
	out := childResult{Attempts: r.n, Allowed: r.allowed, Denied: r.denied, Errors: r.errors, Begin: begin.UnixNano(), End: end.UnixNano()}
	if r.firstErr != nil {
		out.FirstErr = r.firstErr.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// warmPool opens n connections of client by holding n of them at once.
func warmPool(ctx context.Context, client *redis.Client, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- client.Do(ctx, "CLIENT", "ID").Err() }()
	}
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// exactResult is the outcome of the exactness check of one limiter.
type exactResult struct {
	c                                 contender
	attempts, allowed, denied, errors int64
	firstErr                          string
	window                            time.Duration // first decision to last, over all processes
	bound                             int64         // most units the limit allows in window
	refill                            int64         // of which units refilled during the window
	// floor is the fewest units the limiter may admit: the limit, less
	// what leases may leave unspent (overshoot per process)
	floor int64
}

// exactness runs, for each limiter, 4 child processes of this program that
// share one key on one redis-server, with a limit of 1000 per minute, and
// counts what they admit in total.
func exactness(ctx context.Context, addr string, client *redis.Client, cs []contender, quick bool) ([]exactResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	attempts, maxTime := exactPlan(quick)
	var out []exactResult
	for _, c := range cs {
		if c.kind == kindBaseline || c.charges {
			continue
		}
		if c.windowed {
			waitForMinuteRoom(exactStartDelay + maxTime + exactMargin)
		}
		key, err := keyFor(c, exactIdentity)
		if err != nil {
			return nil, err
		}
		// the key must start fresh, as for a new client
		if err := client.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
		start := time.Now().Add(exactStartDelay)
		deadline := start.Add(maxTime)
		type done struct {
			res childResult
			err error
		}
		args := []string{
			"-exact-child", c.name, "-exact-addr", addr, "-exact-key", key,
			"-exact-start", strconv.FormatInt(start.UnixNano(), 10),
			"-exact-deadline", strconv.FormatInt(deadline.UnixNano(), 10),
			"-exact-attempts", strconv.FormatInt(attempts, 10),
			// the children's Limiter, outbound and server rows keep the
			// parent's deadline, so that a loaded machine fails them no
			// sooner than the timed runs
			"-limiter-timeout", limiterTimeout.String(),
		}
		if c.name == serverName {
			// each child runs a server of its own: four replicas of
			// ratekit-server share the key
			bin := serverBin
			if bin == "" {
				if bin, err = serverproc.Build(ctx); err != nil {
					return nil, err
				}
			}
			args = append(args, "-ratekit-server", bin)
		}
		results := make(chan done, exactProcesses)
		for range exactProcesses {
			cmd := exec.Command(exe, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			go func() {
				var d done
				if err := cmd.Wait(); err != nil {
					d.err = fmt.Errorf("child pid %d: %v: %s", cmd.Process.Pid, err, redisproc.Tail(stderr.Bytes(), 2000))
				} else if err := json.Unmarshal(stdout.Bytes(), &d.res); err != nil {
					d.err = fmt.Errorf("child pid %d: bad output %q: %v", cmd.Process.Pid, stdout.String(), err)
				}
				results <- d
			}()
		}
		r := exactResult{c: c}
		var begin, end int64
		var firstErr error
		for range exactProcesses {
			d := <-results
			if d.err != nil {
				firstErr = d.err
				continue
			}
			r.attempts += d.res.Attempts
			r.allowed += d.res.Allowed
			r.denied += d.res.Denied
			r.errors += d.res.Errors
			if r.firstErr == "" {
				r.firstErr = d.res.FirstErr
			}
			if begin == 0 || d.res.Begin < begin {
				begin = d.res.Begin
			}
			end = max(end, d.res.End)
		}
		if firstErr != nil {
			return nil, fmt.Errorf("exactness check of %s: %w", c.name, firstErr)
		}
		if got := r.allowed + r.denied + r.errors; got != r.attempts {
			return nil, fmt.Errorf("fixture: exactness check of %s: %d decisions counted, %d made", c.name, got, r.attempts)
		}
		r.window = time.Duration(end - begin)
		r.bound = exactLimit
		if c.refills {
			r.refill = int64(r.window / (time.Minute / exactLimit))
			r.bound += r.refill
		}
		r.bound += int64(c.overshoot) * exactProcesses
		r.floor = exactLimit - int64(c.overshoot)*exactProcesses
		progress("exactness %s: %d of %d admitted in %v (bound %d), %d errors",
			c.name, r.allowed, r.attempts, r.window.Round(time.Millisecond), r.bound, r.errors)
		out = append(out, r)
	}
	return out, nil
}

// waitForMinuteRoom waits for the next minute if less than room is left in
// this one, so that a check of a limiter with clock-aligned windows runs
// within one window.
func waitForMinuteRoom(room time.Duration) {
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	if next.Sub(now) < room {
		progress("waiting %v for the next minute", next.Sub(now).Round(time.Millisecond))
		time.Sleep(time.Until(next) + 50*time.Millisecond)
	}
}

// verdict says how r compares with what the limit allows.
func (r exactResult) verdict() string {
	switch {
	case r.attempts < r.bound:
		return "inconclusive: fewer attempts than the limit"
	case r.allowed == exactLimit:
		return "exact"
	case r.allowed > exactLimit && r.allowed <= exactLimit+r.refill:
		return "within refill"
	case r.allowed > exactLimit && r.allowed <= r.bound:
		return fmt.Sprintf("within lease bound (over the limit and refill by %d)", r.allowed-exactLimit-r.refill)
	case r.allowed > r.bound:
		return fmt.Sprintf("**over by %d**", r.allowed-r.bound)
	case r.errors == 0 && r.allowed < exactLimit && r.allowed >= r.floor:
		return fmt.Sprintf("within lease bound (under the limit by %d: units leased and left unspent)", exactLimit-r.allowed)
	case r.errors > 0:
		return fmt.Sprintf("under by %d, with errors", exactLimit-r.allowed)
	default:
		return fmt.Sprintf("under by %d", exactLimit-r.allowed)
	}
}
