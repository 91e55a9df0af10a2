package main

import (
	"fmt"
	"strings"

	"github.com/ratekit/ratekit/bench/internal/figures"
)

// headline writes ratekit's GCRA as it ships against the bare script, case
// by case: the figures to quote.
func headline(p func(string, ...any), res *benchResults, rounds int) {
	gcra := res.index(gcraName)
	if gcra < 0 {
		return
	}
	p("ratekit's default algorithm through the store as it ships (`redisstore.New(client)`, batching")
	p("on), one `AllowAllN` call per decision, as a multiple of the bare INCR+PEXPIRE script through the")
	p("same client (medians of per-round ratios; see below for the rest). For decisions/s above 1 is")
	p("faster than the bare script; for latency above 1 is slower. In brackets, the lowest and highest")
	p("of the %d per-round ratios: how much the machine's noise moved them.", rounds)
	p("")
	header, sep := "| |", "|---|"
	for _, g := range goroutineCounts {
		header += fmt.Sprintf(" %d goroutine%s |", g, plural(g))
		sep += "---:|"
	}
	p("%s", header)
	p("%s", sep)
	for _, kc := range keyCases {
		tput, lat := "| decisions/s, "+keysLabel(kc)+" |", "| p50 latency, "+keysLabel(kc)+" |"
		for k, bc := range res.cases {
			if bc.keys != kc {
				continue
			}
			s := res.cells[k][gcra].summary()
			tput += fmt.Sprintf(" %s (%.2f–%.2f) |", ratio(s.vsBare), s.vsBareLow, s.vsBareHigh)
			lat += fmt.Sprintf(" %s (%.2f–%.2f) |", ratio(s.p50VsBare), s.p50VsBareLow, s.p50VsBareHigh)
		}
		p("%s", tput)
		p("%s", lat)
	}
	p("")
}

func keysLabel(kc keyCase) string {
	if kc.count > 1 {
		return figures.Thousands(float64(kc.count)) + " keys"
	}
	return "one hot key"
}

// bar is a goal for contender of's decisions/s over contender to's in the
// same round: at least min(case) times, in each case where min answers
// true.
type bar struct {
	of, to  string
	min     func(benchCase) (float64, bool)
	goal    string // the goal in words, for the table
	because string
}

// everywhere is a bar of min in every case.
func everywhere(min float64) func(benchCase) (float64, bool) {
	return func(benchCase) (float64, bool) { return min, true }
}

// limiterGoal is issue 26's goal for the Limiter path over the bare
// script: 0.95× at one goroutine; on one hot key 3× at 64 goroutines and
// 6× at 256; on 100,000 keys 2.5× and 4×.
func limiterGoal(bc benchCase) (float64, bool) {
	hot := bc.keys.count == 1
	switch {
	case bc.g == 1:
		return 0.95, true
	case bc.g == 64 && hot:
		return 3, true
	case bc.g == 256 && hot:
		return 6, true
	case bc.g == 64:
		return 2.5, true
	case bc.g == 256:
		return 4, true
	}
	return 0, false
}

const limiterGoalText = "≥ 0.95× at g=1; hot ≥ 3× / 6×, 100k ≥ 2.5× / 4× at g=64 / 256"

var bars = []bar{
	{gcraName, redisRateName, everywhere(1), "≥ 1.00×", "the other GCRA on Redis"},
	{gcraName, clockName, everywhere(0.95), "≥ 0.95×", "the floor of a script that reads the clock and a state and writes it back"},
	{fixedName, ululeName, everywhere(1), "≥ 1.00×", "the other fixed window on Redis"},
	{fixedName, bareName, everywhere(0.95), "≥ 0.95×", "the floor of a counter script"},
	{slidingCounterName, mennanovWindowName, everywhere(1), "≥ 1.00×", "the faster other sliding window counter on Redis"},
	{limiterName, bareName, limiterGoal, limiterGoalText, "the path every middleware takes, the quick start's client"},
	{limiterDefaultName, bareName, limiterGoal, limiterGoalText, "the same over go-redis's default client"},
	{limiterName, gcraName, everywhere(0.9), "≥ 0.90×", "the Limiter keeps what the batched store gives"},
	{limiterDefaultName, gcraName, everywhere(0.9), "≥ 0.90×", "likewise over go-redis's default client"},
	{middlewareName, bareName, func(bc benchCase) (float64, bool) { return 10, bc.keys.count == 1 && bc.g == 64 }, "≥ 10× hot g=64", "a hot key served through the middleware with leasing"},
}

// writeBars writes, for each bar whose two contenders res has, the ratio
// of their decisions/s in each case, marking the cells that miss the bar.
func writeBars(p func(string, ...any), res *benchResults) {
	p("Median over rounds of one contender's decisions/s over the other's in the same round; **bold, with")
	p("\"miss\"**, where the ratio falls short of its goal in that cell (a cell without a goal is shown for")
	p("reference).")
	p("")
	caseHeader(p, res, "| ratio | goal |", "|---|---|")
	for _, b := range bars {
		ci, cj := res.index(b.of), res.index(b.to)
		if ci < 0 || cj < 0 {
			continue
		}
		row := fmt.Sprintf("| %s ÷ %s (%s) | %s |", b.of, b.to, b.because, b.goal)
		for k, bc := range res.cases {
			m, _, _ := res.ratioTo(k, ci, cj)
			cellText := ratio(m)
			if min, ok := b.min(bc); ok && m < min {
				cellText = "**" + cellText + " miss**"
			}
			row += " " + cellText + " |"
		}
		p("%s", row)
	}
	ceilingRow(p, res)
	p("")
}

// misses returns the cells of res that miss a bar, as "of ÷ to, case".
func misses(res *benchResults) []string {
	var out []string
	for _, b := range bars {
		ci, cj := res.index(b.of), res.index(b.to)
		if ci < 0 || cj < 0 {
			continue
		}
		for k, bc := range res.cases {
			m, _, _ := res.ratioTo(k, ci, cj)
			if min, ok := b.min(bc); ok && m < min {
				out = append(out, fmt.Sprintf("%s ÷ %s, %v: %s", b.of, b.to, bc, ratio(m)))
			}
		}
	}
	if m, ok := res.ceilingRatio(); ok && m < ceilingGoal {
		out = append(out, fmt.Sprintf("%s ÷ pipelined EVALSHA ceiling, 100k g=256: %s", gcraName, ratio(m)))
	}
	return out
}

// ratioTable writes every contender's decisions/s over the bare script's,
// case by case.
func ratioTable(p func(string, ...any), res *benchResults) {
	p("Median over rounds of (contender's decisions/s) / (bare INCR+PEXPIRE script's decisions/s), same case,")
	p("same round. Above 1 is faster than the bare script.")
	p("")
	caseHeader(p, res, "| contender |", "|---|")
	for ci, c := range res.contenders {
		row := "| " + c.name + " |"
		for k := range res.cases {
			row += " " + ratio(res.cells[k][ci].summary().vsBare) + " |"
		}
		p("%s", row)
	}
	p("")
}

// networkSection writes the network pass, if there was one.
func (rep *report) networkSection(p func(string, ...any)) {
	n := rep.network
	if n == nil {
		return
	}
	direct, through := pingP50(rep.bench), pingP50(n.bench)
	p("## Through a network: %v each way", n.latency)
	p("")
	p("The same cases, %d round%s, for fewer contenders, through an in-process toxiproxy between the client", n.rounds, plural(n.rounds))
	p("and redis-server that holds every byte for %v in each direction (a toxic of `bench/internal/netdelay`:", n.latency)
	p("toxiproxy's own latency toxic counts in milliseconds), as a link inside one data centre would. The")
	p("proxy runs in this process, on the same CPUs, and copies every byte twice. Measured: PING's p50 at")
	p("1 goroutine was %s through the proxy against %s direct, %s more (%v added by design).",
		figures.Dur(through), figures.Dur(direct), figures.Dur(through-direct), 2*n.latency)
	p("")
	p("### GCRA as it ships against the bare script")
	p("")
	headline(p, n.bench, n.rounds)
	p("### Each algorithm as it ships against the best peer of its kind, and the goals")
	p("")
	writeBars(p, n.bench)
	p("%s", ceilingText(n.bench))
	p("")
	if ms := misses(n.bench); len(ms) > 0 {
		p("Cells that miss: %s.", strings.Join(ms, "; "))
		p("")
	}
	p("### Decisions/s as a multiple of the bare script")
	p("")
	ratioTable(p, n.bench)
	p("### p50 and p99 latency")
	p("")
	latencyTable(p, n.bench)
}

// latencyTable writes each contender's p50 and p99, case by case.
func latencyTable(p func(string, ...any), res *benchResults) {
	caseHeader(p, res, "| contender |", "|---|")
	for ci, c := range res.contenders {
		row := "| " + c.name + " |"
		for k := range res.cases {
			s := res.cells[k][ci].summary()
			row += " " + figures.Dur(s.p50) + " / " + figures.Dur(s.p99) + " |"
		}
		p("%s", row)
	}
	p("")
}

// costColumns heads the cost cells of costCells.
const costColumns = "script µs | other µs | CPU µs | commands | scripts | bytes"

// costSection writes redis-server's cost per decision of every contender
// at 64 goroutines (every case is in the tables of each case).
func costSection(p func(string, ...any), res *benchResults) {
	p("## Redis's cost per decision")
	p("")
	p("Read from redis-server around each run and divided by the run's calls, medians over the rounds.")
	p("From `INFO commandstats`: *script µs*, the time of EVALSHA and EVAL calls, which includes that of")
	p("the commands the scripts call; *other µs*, the time of every other command but the sampling's own")
	p("INFO, whether a client sent it or a script called it (Redis counts both alike, so for a script")
	p("contender this is time already in script µs, and for the rest it is their commands' time);")
	p("*commands*, every command, those scripts call included; *scripts*, script calls. *CPU µs* is")
	p("redis-server's user + system time (`/proc/<pid>/stat`, in ticks of 10 ms over the run), *bytes*")
	p("the network bytes in + out (`total_net_input_bytes` + `total_net_output_bytes` of `INFO stats`,")
	p("less the sampling's own). At 64 goroutines here; the tables of each case have every case.")
	p("")
	var header, sep strings.Builder
	header.WriteString("| contender |")
	sep.WriteString("|---|")
	var ks []int
	for k, bc := range res.cases {
		if bc.g == 64 {
			ks = append(ks, k)
			fmt.Fprintf(&header, " %s: %s |", bc.keys.name, costColumns)
			sep.WriteString(strings.Repeat("---:|", 6))
		}
	}
	p("%s", header.String())
	p("%s", sep.String())
	for ci, c := range res.contenders {
		row := "| " + c.name + " |"
		for _, k := range ks {
			row += costCells(res.cells[k][ci].summary())
		}
		p("%s", row)
	}
	p("")
}

// costCells returns s's cost per decision as six table cells.
func costCells(s summary) string {
	if !s.metered {
		return strings.Repeat(" |", 6)
	}
	cpu := "–"
	if s.cost.CPUOK {
		cpu = fmt.Sprintf("%.2f", s.cost.CPUUsec)
	}
	return fmt.Sprintf(" %.2f | %.2f | %s | %.2f | %.2f | %.0f |", s.cost.ScriptUsec, s.cost.OtherUsec, cpu, s.cost.Calls, s.cost.ScriptCalls, s.cost.Bytes)
}

// caseHeader writes a table's header: the first columns, then one per case
// of res.
func caseHeader(p func(string, ...any), res *benchResults, first, firstSep string) {
	header, sep := first, firstSep
	for _, bc := range res.cases {
		header += " " + bc.String() + " |"
		sep += "---:|"
	}
	p("%s", header)
	p("%s", sep)
}
