package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/bench/internal/proccpu"
)

// runResult is one measured run of one contender on one case.
type runResult struct {
	n        int64 // planned decisions
	allowed  int64
	denied   int64
	errors   int64
	firstErr error
	elapsed  time.Duration
	mallocs  uint64 // heap allocations of the whole process during the run
	// cpu is this process's CPU time during the run, user and system
	// (cpuOK false when it could not be read)
	cpu       time.Duration
	cpuOK     bool
	p50, p99  time.Duration
	perSecond float64 // decisions (allowed + denied) per second
}

func (r runResult) allocsPerDecision() float64 { return float64(r.mallocs) / float64(r.n) }

// cpuPerDecision is the process's CPU time of the run, in µs, over the
// calls made.
func (r runResult) cpuPerDecision() float64 {
	return float64(r.cpu.Microseconds()) / float64(max(r.n, 1))
}

// run makes n decisions from g goroutines, each with its own decideFunc
// from newWorker, taking keys in turn from keys starting at base. Each
// goroutine takes the index of its next decision from a shared counter, so
// all g stay busy to the end. It records every decision's latency in
// lat[index] (lat must hold n entries; nil records none).
//
// If stop is not nil, the goroutines also end once it is set; then fewer
// than n decisions may be made, and r.n is what was made.
//
// The loop allocates nothing of its own: goroutines, decision functions and
// the latency slice exist before the clock starts, and counts are kept in
// locals until the end.
func run(newWorker func() decideFunc, keys *keySet, base, g int, n int64, lat []time.Duration, stop *atomic.Bool) runResult {
	var (
		next                  atomic.Int64
		allowed, denied, errs atomic.Int64
		firstErr              atomic.Pointer[error]
		ready, wg             sync.WaitGroup
		startGate             = make(chan struct{})
	)
	ready.Add(g)
	for range g {
		decide := newWorker()
		wg.Go(func() {
			var a, d, e int64
			ready.Done()
			<-startGate
			for {
				if stop != nil && stop.Load() {
					break
				}
				i := next.Add(1) - 1
				if i >= n {
					break
				}
				key := keys.key(int((int64(base) + i) % int64(keys.len())))
				t0 := time.Now()
				ok, err := decide(key)
				if lat != nil {
					lat[i] = time.Since(t0)
				}
				switch {
				case err != nil:
					e++
					if firstErr.Load() == nil {
						first := err // escapes only here, off the common path
						firstErr.CompareAndSwap(nil, &first)
					}
				case ok:
					a++
				default:
					d++
				}
			}
			allowed.Add(a)
			denied.Add(d)
			errs.Add(e)
		})
	}
	ready.Wait()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, cpuOK0 := proccpu.CPU(os.Getpid())
	begin := time.Now()
	close(startGate)
	wg.Wait()
	elapsed := time.Since(begin)
	cpu1, cpuOK1 := proccpu.CPU(os.Getpid())
	runtime.ReadMemStats(&after)

	r := runResult{
		n:       n,
		allowed: allowed.Load(), denied: denied.Load(), errors: errs.Load(),
		elapsed: elapsed,
		mallocs: after.Mallocs - before.Mallocs,
		cpu:     cpu1 - cpu0, cpuOK: cpuOK0 && cpuOK1,
	}
	if p := firstErr.Load(); p != nil {
		r.firstErr = *p
	}
	if stop != nil {
		r.n = r.allowed + r.denied + r.errors
	}
	r.perSecond = float64(r.allowed+r.denied) / elapsed.Seconds()
	if lat != nil {
		s := lat[:n]
		slices.Sort(s)
		r.p50, r.p99 = quantile(s, 0.50), quantile(s, 0.99)
	}
	return r
}

// mergeRuns returns the runs of one contender on one case as one run:
// counts, times and allocations summed, decisions/s over the time summed,
// and the latency quantiles of lat, which holds every run's latencies (and
// is sorted).
func mergeRuns(parts []runResult, lat []time.Duration) runResult {
	r := runResult{cpuOK: len(parts) > 0}
	for _, p := range parts {
		r.n += p.n
		r.allowed, r.denied, r.errors = r.allowed+p.allowed, r.denied+p.denied, r.errors+p.errors
		if r.firstErr == nil {
			r.firstErr = p.firstErr
		}
		r.elapsed += p.elapsed
		r.mallocs += p.mallocs
		r.cpu += p.cpu
		r.cpuOK = r.cpuOK && p.cpuOK
	}
	if r.elapsed > 0 {
		r.perSecond = float64(r.allowed+r.denied) / r.elapsed.Seconds()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	}
	return r
}

// sliceOf returns how many of n decisions slice s of slices makes: n
// spread as evenly as may be, the first slices taking the remainder.
func sliceOf(n int64, s, slices int) int64 {
	q, rem := n/int64(slices), n%int64(slices)
	if int64(s) < rem {
		return q + 1
	}
	return q
}

// check verifies the fixture after a run: every planned decision was made.
func (r runResult) check() error {
	if got := r.allowed + r.denied + r.errors; got != r.n {
		return fmt.Errorf("fixture: %d decisions made, want %d", got, r.n)
	}
	return nil
}

// quantile returns the q-quantile of sorted s, by the nearest rank.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
