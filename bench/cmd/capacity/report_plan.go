package main

import (
	"fmt"
	"math"
	"time"

	"github.com/ratekit/ratekit/bench/internal/proccpu"

	"github.com/ratekit/ratekit/bench/internal/figures"
	"github.com/ratekit/ratekit/core"
)

// manyRows returns the indexes of the rows on many keys, in order.
func (r *report) manyRows() []int {
	var is []int
	for i, row := range r.rows {
		if row.c.keys.count > 1 {
			is = append(is, i)
		}
	}
	return is
}

// cpuOf returns the median process CPU µs per decision of row i, or false.
func (r *report) cpuOf(i int) (float64, bool) {
	if i < 0 || !r.rows[i].cpuOK() {
		return 0, false
	}
	us := r.rows[i].stat(sample.cpuUS).med
	return us, us > 0
}

func (r *report) masters(p *printer) {
	h := r.opts.headroom
	p.f(sections[3])
	p.f("")
	p.f("One Redis master executes commands on one core, so a master serves at most 1 s of process CPU a")
	p.f("second. Planned at %.0f%% of that core (`-headroom %g`), a fleet rate needs", 100*h, h)
	p.f("⌈rate × process CPU per decision ÷ %g⌉ masters, the keys spread evenly over the slots. Each", h)
	p.f("figure comes from the row named, on %s keys (median process CPU µs per decision).", figures.Thousands(float64(r.opts.manyKeys)))
	p.f("")
	p.f("| algorithm | mode | from | 100k decisions/s | 1M decisions/s | 10M decisions/s |")
	p.f("|---|---|---|---:|---:|---:|")
	for _, i := range r.manyRows() {
		row := r.rows[i]
		cells := make([]string, len(planRates))
		for k, rate := range planRates {
			cells[k] = "n/a (no CPU figure)"
			us, ok := r.cpuOf(i)
			if !ok {
				continue
			}
			if m, ok := planMasters(rate, us, h); ok {
				cells[k] = fmt.Sprintf("%s/s × %.2f µs = %.2f cores ÷ %g = **%d**", figures.Thousands(rate), us, m.cores, h, m.masters)
			}
		}
		p.f("| %s | %s | %s | %s | %s | %s |", row.c.algName(), row.c.mode, id(i), cells[0], cells[1], cells[2])
	}
	p.f("")
}

func (r *report) hotKey(p *printer) {
	p.f(sections[4])
	p.f("")
	p.f("A key lives in one slot, on one master, and its decisions run one at a time there: one hot key's")
	p.f("decisions/s are at most 1 ÷ (process CPU per decision on the hot key), a whole core, whatever the")
	p.f("number of masters. From the hot-key rows:")
	p.f("")
	p.f("| algorithm | mode | from | cap of one hot key |")
	p.f("|---|---|---|---:|")
	for i, row := range r.rows {
		if row.c.keys.count != 1 || row.c.mode == leasing {
			continue
		}
		cell := "n/a (no CPU figure)"
		if us, ok := r.cpuOf(i); ok {
			c, _ := perSecond(us)
			cell = fmt.Sprintf("1 ÷ %.2f µs = **%s/s**", us, sig3(c))
		}
		if row.c.alg == core.SlidingWindowLog {
			cell += fmt.Sprintf(" (its own limit caps it at %s/s)", figures.Thousands(core.MaxLogRate))
		}
		p.f("| %s | %s | %s | %s |", row.c.algName(), row.c.mode, id(i), cell)
	}
	p.f("")
	r.leasingCap(p)
}

func (r *report) leasingCap(p *printer) {
	li := r.find(runCase{core.GCRA, leasing, keyCase{"hot", 1}})
	ui := r.find(runCase{core.GCRA, unbatched, keyCase{"hot", 1}})
	if li < 0 || ui < 0 {
		return
	}
	lrow, urow := r.rows[li], r.rows[ui]
	size := lrow.samples[0].leaseSize
	calls := lrow.stat(sample.scriptCalls).med
	p.f("Leasing (GCRA): a lease takes `Size` units in one script call, `leasestore.Store.Size`")
	p.f("of the limit, here min(%s ÷ 64, 65,536) = %d units; the replica then spends them without Redis for up", figures.Thousands(benchRate), size)
	p.f("to the lease's hold. Measured on the hot key (%s), Redis saw %.5f script calls per decision, where", id(li), calls)
	p.f("1 ÷ %d = %.5f would be one call per lease. Each lease call costs about what one unbatched call does", size, 1/float64(size))
	p.f("(the lease calls of one key queue behind each other), so:")
	p.f("")
	if uus, ok := r.cpuOf(ui); ok {
		perCall := uus / urow.stat(sample.scriptCalls).med
		if c, ok := leasedCap(perCall, calls); ok {
			p.f("- lifted cap: %.2f µs per call (%s: %.2f µs ÷ %.4f calls per decision) × %.5f calls per decision (%s)", perCall, id(ui), uus, urow.stat(sample.scriptCalls).med, calls, id(li))
			p.f("  = %.4f µs per decision → 1 ÷ %.4f µs = **%s decisions/s** of Redis's side, against %s unleased (%s).", c.usPerDecision, c.usPerDecision, sig3(c.cap), capOf(uus), id(ui))
		} else {
			p.f("- lifted cap: n/a (the leasing run made no lease call to count)")
		}
	}
	r.leasedCPU(p, li)
	p.f("- long before that, the replicas' own CPU bounds a leased key: each decision is made in a replica's")
	p.f("  own process (this one made %s decisions/s on the key, %s, sharing its CPUs with Redis), so the", sig3(lrow.stat(sample.rate).med), id(li))
	p.f("  key's total grows with the replicas until it meets the lifted cap.")
	over := overshoot(size, r.opts.replicas)
	p.f("- the price, from leasestore's bound (limit + (Size − 1) × replicas per window, `leasestore.Store.Size`): with %d", r.opts.replicas)
	p.f("  replicas, (%d − 1) × %d = %s units over the limit per window; here that is %.3f%% of %s per minute.",
		size, r.opts.replicas, figures.Thousands(float64(over)), 100*float64(over)/benchRate, figures.Thousands(benchRate))
	p.f("  Under the default size (capacity ÷ 64, for capacities of 128 to 4,194,304) it is up to %d ÷ 64 = %.2f× the", r.opts.replicas, float64(r.opts.replicas)/64)
	p.f("  limit: lease only keys whose limit is far above (Size − 1) × replicas, or set `leasestore.WithSize`.")
	p.f("")
}

// leasedCPU states the process CPU measured on the leased hot key (row
// li), which the clock tick makes coarse: the derived cap is the one to
// plan with.
func (r *report) leasedCPU(p *printer, li int) {
	row := r.rows[li]
	if !row.cpuOK() {
		return
	}
	if lus, ok := r.cpuOf(li); ok {
		c, _ := perSecond(lus)
		p.f("- measured directly: %.4f µs of process CPU per decision (%s) → 1 ÷ %.4f µs = %s/s; with so few", lus, id(li), lus, sig3(c))
		p.f("  script calls a run this is mostly clock ticks and the server's background work: plan with the derived cap.")
		return
	}
	n := row.stat(func(s sample) float64 { return float64(s.load.decisions) }).med
	if n == 0 {
		return
	}
	p.f("- measured directly: the server's CPU time over the run (%s, %s decisions) stayed within one clock tick", id(li), figures.Thousands(n))
	p.f("  of %v, under %.4f µs per decision: too coarse to plan with, so the derived cap is the one to use.", proccpu.Tick, float64(proccpu.Tick/time.Microsecond)/n)
}

func capOf(us float64) string {
	c, _ := perSecond(us)
	return sig3(c) + "/s"
}

// sig3 rounds x to three significant digits and groups them by thousands:
// 89,575,635 is "89,600,000".
func sig3(x float64) string {
	if x <= 0 {
		return figures.Thousands(x)
	}
	scale := math.Pow(10, math.Floor(math.Log10(x))-2)
	return figures.Thousands(math.Round(x/scale) * scale)
}
