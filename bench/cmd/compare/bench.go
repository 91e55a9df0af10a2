package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/figures"
	"github.com/ratekit/ratekit/bench/internal/rediscost"
)

// meter reads redis-server's counters around each run: through its own
// client, so that a network pass's proxy does not slow the sampling, and
// from the server's process, pid.
type meter struct {
	client *redis.Client
	pid    int
}

// run returns measured(), and what redis-server spent during it (the zero
// value for a nil meter).
func (m *meter) run(ctx context.Context, measured func() runResult) (runResult, rediscost.Counters, error) {
	before, err := m.sample(ctx)
	if err != nil {
		return runResult{}, rediscost.Counters{}, err
	}
	rr := measured()
	after, err := m.sample(ctx)
	if err != nil {
		return runResult{}, rediscost.Counters{}, err
	}
	return rr, rediscost.Delta(before, after), nil
}

// sample returns the server's counters, or the zero value for a nil meter.
func (m *meter) sample(ctx context.Context) (rediscost.Counters, error) {
	if m == nil {
		return rediscost.Counters{}, nil
	}
	return rediscost.Sample(ctx, m.client, m.pid)
}

// cell holds the runs of one contender on one case, one per round.
type cell struct {
	runs []runResult
	// costs holds, per round, what redis-server spent during the run
	// (empty when the runs were not metered).
	costs []rediscost.Counters
	// vsBare holds, per round, decisions/s over the bare script's
	// decisions/s on the same case in the same round; p50VsBare likewise
	// for the median latency.
	vsBare, p50VsBare []float64
}

type benchResults struct {
	contenders []contender
	cases      []benchCase
	planned    [][]int64 // [case][contender]: decisions planned over all rounds
	cells      [][]*cell // [case][contender]
	// ceilings holds redis-benchmark's run of each round (see ceiling.go);
	// empty when it is not installed.
	ceilings []ceilingRun
}

// maxDecisions bounds the decisions of one run.
const maxDecisions = 20_000_000

// measure runs every contender on every case in o.rounds interleaved
// rounds. Before the first round, a warm-up run of each contender on each
// case opens the connections and loads the scripts. Unless o.quick, each
// run makes as many decisions as should take o.duration at the rates seen
// so far.
//
// m, when not nil, samples redis-server's counters around every measured
// run, for the Redis cost of a decision.
func measure(ctx context.Context, client *redis.Client, cs []contender, o options, m *meter) (*benchResults, error) {
	res := &benchResults{contenders: cs, cases: cases()}
	keys := make([][]*keySet, len(cs)) // [contender][key case]
	open := make([]func() decideFunc, len(cs))
	bare := -1
	for i, c := range cs {
		if c.name == bareName {
			bare = i
		}
		for _, kc := range keyCases {
			k, err := buildKeys(c, kc.count)
			if err != nil {
				return nil, err
			}
			keys[i] = append(keys[i], k)
		}
		var err error
		if open[i], err = c.open(ctx, client, benchLimit); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if bare < 0 {
		return nil, fmt.Errorf("no %s baseline", bareName)
	}
	keysOf := func(ci, k int) *keySet { return keys[ci][keyCaseIndex(res.cases[k].keys)] }

	progress("warming up %d contenders on %d cases", len(cs), len(res.cases))
	// rates holds the decisions/s seen so far of each contender on each
	// case, the warm-up's first: the next run's number of decisions is
	// their median times o.duration, so one slow warm-up on a noisy
	// machine does not make every run of a contender short.
	rates := make([][][]float64, len(res.cases))
	plan := func(k, ci int) int64 {
		if o.quick {
			return int64(res.cases[k].g + quickExtra)
		}
		perSecond := figures.Median(append([]float64(nil), rates[k][ci]...))
		// at least one call per goroutine, and enough for a p99
		return min(max(int64(perSecond*o.duration.Seconds()), int64(res.cases[k].g), 100), maxDecisions)
	}
	for k, bc := range res.cases {
		res.planned = append(res.planned, make([]int64, len(cs)))
		res.cells = append(res.cells, make([]*cell, len(cs)))
		rates[k] = make([][]float64, len(cs))
		for ci := range cs {
			res.cells[k][ci] = &cell{}
			if o.quick {
				run(open[ci], keysOf(ci, k), 0, bc.g, int64(bc.g), nil, nil)
				continue
			}
			var stop atomic.Bool
			t := time.AfterFunc(max(o.duration/5, 100*time.Millisecond), func() { stop.Store(true) })
			w := run(open[ci], keysOf(ci, k), 0, bc.g, 1<<40, nil, &stop)
			t.Stop()
			rates[k][ci] = append(rates[k][ci], float64(w.n)/w.elapsed.Seconds())
		}
	}
	lat := make([][]time.Duration, len(cs)) // each contender's latencies in a round, reused

	for r := range o.rounds {
		// the server's ceiling, measured in the round it is compared in
		n := 2000
		if !o.quick {
			n = max(int(400_000*o.duration.Seconds()), 20_000)
		}
		switch c, ok, err := measureCeiling(ctx, client, n); {
		case err != nil:
			return nil, err
		case ok:
			res.ceilings = append(res.ceilings, c)
			progress("round %d/%d: redis-benchmark ceiling %.0f/s pipelined, %.0f/s with %d in flight, %.0f/s one per round trip", r+1, o.rounds, c.pipelined, c.crowd, crowdConnections*ceilingDepth, c.single)
		}
		for k, bc := range res.cases {
			var line strings.Builder
			rounds, err := measureRound(ctx, m, open, keysOf, k, bc, r, o.rounds, plan, lat)
			if err != nil {
				return nil, err
			}
			for ci, rr := range rounds {
				if err := rr.run.check(); err != nil {
					return nil, fmt.Errorf("%s, %v: %w", cs[ci].name, bc, err)
				}
				if cs[ci].kind == kindBaseline && rr.run.errors > 0 {
					return nil, fmt.Errorf("baseline %s, %v: %d errors: %w", cs[ci].name, bc, rr.run.errors, rr.run.firstErr)
				}
				res.planned[k][ci] += rr.planned
				c := res.cells[k][ci]
				c.runs = append(c.runs, rr.run)
				if m != nil {
					c.costs = append(c.costs, rr.cost)
				}
				rates[k][ci] = append(rates[k][ci], float64(rr.run.n)/rr.run.elapsed.Seconds())
				fmt.Fprintf(&line, " %s %.0f/s;", cs[ci].name, rr.run.perSecond)
			}
			b := res.cells[k][bare].runs[r]
			for ci := range cs {
				c := res.cells[k][ci]
				rr := c.runs[r]
				c.vsBare = append(c.vsBare, rr.perSecond/b.perSecond)
				c.p50VsBare = append(c.p50VsBare, float64(rr.p50)/float64(b.p50))
			}
			progress("round %d/%d %v:%s", r+1, o.rounds, bc, line.String())
		}
	}
	for k, bc := range res.cases {
		for ci, c := range cs {
			var made int64
			for _, r := range res.cells[k][ci].runs {
				made += r.allowed + r.denied + r.errors
			}
			if made != res.planned[k][ci] {
				return nil, fmt.Errorf("fixture: %s, %v: %d decisions made over the rounds, %d planned", c.name, bc, made, res.planned[k][ci])
			}
		}
	}
	return res, nil
}

// runSlices is how many slices each contender's run on a case is cut
// into within a round: every contender runs its first slice, in turn, then
// its second, and so on, so that the contenders of a case share the
// machine's moments, whose noise (other work on shared CPUs) changes over
// seconds. A round's figures of a contender are its slices' together.
const runSlices = 5

// roundRun is one contender's run on one case in one round: its slices
// merged, and what redis-server spent during them.
type roundRun struct {
	planned int64 // decisions
	run     runResult
	cost    rediscost.Counters
}

// measureRound runs every contender on case k (bc) in round r of rounds,
// in runSlices slices each (see runSlices), in an order drawn anew for
// every slice (the same for the same round, case and slice in every
// run). Each contender makes plan(k, ci) decisions, its
// keys taken in turn from where its previous slice stopped; lat holds
// each contender's latency buffer, grown as needed.
func measureRound(ctx context.Context, m *meter, open []func() decideFunc, keysOf func(ci, k int) *keySet,
	k int, bc benchCase, r, rounds int, plan func(k, ci int) int64, lat [][]time.Duration) ([]roundRun, error) {
	cs := len(open)
	n, done := make([]int64, cs), make([]int64, cs)
	parts := make([][]runResult, cs)
	out := make([]roundRun, cs)
	for ci := range cs {
		n[ci] = plan(k, ci)
		if int64(cap(lat[ci])) < n[ci] {
			lat[ci] = make([]time.Duration, n[ci])
		}
		out[ci].cost.CPUOK = true
	}
	for s := range runSlices {
		// a new order for every slice, so that no contender always runs
		// first, or right after the same other one: a contender that
		// loads the machine would otherwise weigh on the same neighbour
		// in every slice of every round
		order := rand.New(rand.NewPCG(uint64(r), uint64(k*runSlices+s))).Perm(cs)
		for _, ci := range order {
			ns := sliceOf(n[ci], s, runSlices)
			if ns == 0 {
				continue
			}
			ks := keysOf(ci, k)
			base := (r*ks.len()/rounds + int(done[ci])) % ks.len()
			buf := lat[ci][done[ci] : done[ci]+ns]
			rr, cost, err := m.run(ctx, func() runResult {
				return run(open[ci], ks, base, bc.g, ns, buf, nil)
			})
			if err != nil {
				return nil, err
			}
			parts[ci] = append(parts[ci], rr)
			out[ci].cost = out[ci].cost.Add(cost)
			done[ci] += ns
		}
	}
	for ci := range cs {
		out[ci].planned, out[ci].run = n[ci], mergeRuns(parts[ci], lat[ci][:n[ci]])
	}
	return out, nil
}

func keyCaseIndex(kc keyCase) int {
	for i, k := range keyCases {
		if k == kc {
			return i
		}
	}
	panic("unknown key case " + kc.name)
}

// summary is a cell reduced to medians over its rounds, with counts summed.
type summary struct {
	perSecond, vsBare, p50VsBare, allocs float64
	// cpu is this process's CPU µs per decision, the median over the
	// rounds; cpuOK is false when it could not be read
	cpu   float64
	cpuOK bool
	// the lowest and highest per-round ratios
	vsBareLow, vsBareHigh, p50VsBareLow, p50VsBareHigh float64
	p50, p99                                           time.Duration
	decisions, denied, errors                          int64
	firstErr                                           error
	// cost is redis-server's per decision, medians over the rounds of
	// each figure; metered is false when the runs were not metered.
	cost    rediscost.PerDecision
	metered bool
}

func (c *cell) summary() summary {
	var ps, allocs, cpu, p50, p99 []float64
	s := summary{vsBare: figures.Median(append([]float64(nil), c.vsBare...)), p50VsBare: figures.Median(append([]float64(nil), c.p50VsBare...))}
	for _, r := range c.runs {
		ps = append(ps, r.perSecond)
		allocs = append(allocs, r.allocsPerDecision())
		cpu = append(cpu, r.cpuPerDecision())
		p50 = append(p50, float64(r.p50))
		p99 = append(p99, float64(r.p99))
		s.decisions += r.n
		s.denied += r.denied
		s.errors += r.errors
		if s.firstErr == nil {
			s.firstErr = r.firstErr
		}
	}
	s.perSecond, s.allocs = figures.Median(ps), figures.Median(allocs)
	s.cpu, s.cpuOK = figures.Median(cpu), len(c.runs) > 0
	for _, r := range c.runs {
		s.cpuOK = s.cpuOK && r.cpuOK
	}
	s.vsBareLow, s.vsBareHigh = slices.Min(c.vsBare), slices.Max(c.vsBare)
	s.p50VsBareLow, s.p50VsBareHigh = slices.Min(c.p50VsBare), slices.Max(c.p50VsBare)
	s.p50, s.p99 = time.Duration(figures.Median(p50)), time.Duration(figures.Median(p99))
	s.cost, s.metered = c.costPerDecision()
	return s
}

// costPerDecision returns the medians over the rounds of redis-server's
// cost per decision, figure by figure, and false if c was not metered.
func (c *cell) costPerDecision() (rediscost.PerDecision, bool) {
	if len(c.costs) == 0 || len(c.costs) != len(c.runs) {
		return rediscost.PerDecision{}, false
	}
	var scriptUsec, otherUsec, cpu, calls, scripts, bytes []float64
	cpuOK := true
	for i, d := range c.costs {
		p := d.Per(c.runs[i].n)
		scriptUsec, otherUsec, cpu = append(scriptUsec, p.ScriptUsec), append(otherUsec, p.OtherUsec), append(cpu, p.CPUUsec)
		calls, scripts, bytes = append(calls, p.Calls), append(scripts, p.ScriptCalls), append(bytes, p.Bytes)
		cpuOK = cpuOK && p.CPUOK
	}
	return rediscost.PerDecision{
		ScriptUsec: figures.Median(scriptUsec), OtherUsec: figures.Median(otherUsec), CPUUsec: figures.Median(cpu),
		Calls: figures.Median(calls), ScriptCalls: figures.Median(scripts), Bytes: figures.Median(bytes), CPUOK: cpuOK,
	}, true
}

// index returns the position of contender name in res, or -1.
func (res *benchResults) index(name string) int {
	for i, c := range res.contenders {
		if c.name == name {
			return i
		}
	}
	return -1
}

// ratioTo returns, on case k, the median over rounds of contender ci's
// decisions/s over contender cj's in the same round, with the lowest and
// highest of the per-round ratios.
func (res *benchResults) ratioTo(k, ci, cj int) (median, low, high float64) {
	a, b := res.cells[k][ci].runs, res.cells[k][cj].runs
	var rs []float64
	for r := range min(len(a), len(b)) {
		rs = append(rs, a[r].perSecond/b[r].perSecond)
	}
	if len(rs) == 0 {
		return 0, 0, 0
	}
	return figures.Median(append([]float64(nil), rs...)), slices.Min(rs), slices.Max(rs)
}
