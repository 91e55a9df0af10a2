package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/figures"
)

// The ceiling is what the server does for a C client that pipelines:
// redis-benchmark (Debian's redis-tools) calling the bare script by EVALSHA
// on 100,000 random keys from 64 connections, 16 commands deep, measured
// in each round of a pass, beside the same with one command per round trip.
// Batched calls over 100,000 keys at 256 goroutines should reach
// ceilingGoal of it. That is 1,024 commands in flight against the case's
// 256 at most, so each round also measures redis-benchmark held to as many
// (crowdConnections connections, ceilingDepth deep), which the report gives
// beside it: across a link, what a client can have in flight bounds its
// rate.
const (
	ceilingGoal        = 0.8
	ceilingConnections = 64
	ceilingDepth       = 16
	crowdConnections   = 16
)

// ceilingRun is one round's measurement: requests/s pipelined, pipelined
// with as many commands in flight as the ceiling's case has goroutines,
// and one per round trip.
type ceilingRun struct {
	pipelined, crowd, single float64
}

// redisBenchmark is the path of redis-benchmark, or "" when it is not
// installed (bench/run.sh installs it).
var redisBenchmark, _ = exec.LookPath("redis-benchmark")

// rpsLine matches redis-benchmark's -q output: "EVALSHA ...: 381000.00
// requests per second, p50=..."
var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// measureCeiling runs redis-benchmark against the server client talks to
// (through the proxy in the network pass), n requests pipelined and n/4
// one per round trip; ok is false when redis-benchmark is not installed.
func measureCeiling(ctx context.Context, client *redis.Client, n int) (ceilingRun, bool, error) {
	if redisBenchmark == "" {
		return ceilingRun{}, false, nil
	}
	if err := bareScript.Load(ctx, client).Err(); err != nil {
		return ceilingRun{}, false, err
	}
	host, port, err := net.SplitHostPort(client.Options().Addr)
	if err != nil {
		return ceilingRun{}, false, err
	}
	run := func(conns, depth, n int) (float64, error) {
		cmd := exec.CommandContext(ctx, redisBenchmark, "-h", host, "-p", port,
			"-c", strconv.Itoa(conns), "-P", strconv.Itoa(depth), "-n", strconv.Itoa(max(n, conns)),
			"-r", strconv.Itoa(manyKeys), "-q",
			"EVALSHA", bareScript.Hash(), "1", "cmp-ceiling:{__rand_int__}", "60000")
		out, err := cmd.Output()
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark: %w", err)
		}
		m := rpsLine.FindAllSubmatch(out, -1)
		if len(m) == 0 {
			return 0, fmt.Errorf("redis-benchmark: no rate in %q", strings.TrimSpace(string(out)))
		}
		return strconv.ParseFloat(string(m[len(m)-1][1]), 64)
	}
	var r ceilingRun
	if r.pipelined, err = run(ceilingConnections, ceilingDepth, n); err != nil {
		return r, false, err
	}
	if r.crowd, err = run(crowdConnections, ceilingDepth, n); err != nil {
		return r, false, err
	}
	if r.single, err = run(ceilingConnections, 1, n/4); err != nil {
		return r, false, err
	}
	return r, true, nil
}

// ceilingCase returns the index of the case on 100,000 keys at 256
// goroutines in res, or -1.
func (res *benchResults) ceilingCase() int {
	for k, bc := range res.cases {
		if bc.keys.count == manyKeys && bc.g == 256 {
			return k
		}
	}
	return -1
}

// ceilingRatio returns the median over rounds of ratekit gcra's
// decisions/s on 100,000 keys at 256 goroutines over that round's
// pipelined ceiling, and false when the ceiling was not measured.
func (res *benchResults) ceilingRatio() (float64, bool) {
	return res.gcraOver(func(c ceilingRun) float64 { return c.pipelined })
}

// gcraOver returns the median over rounds of ratekit gcra's decisions/s on
// 100,000 keys at 256 goroutines over of(that round's ceiling run), and
// false when the ceiling was not measured.
func (res *benchResults) gcraOver(of func(ceilingRun) float64) (float64, bool) {
	k, gcra := res.ceilingCase(), res.index(gcraName)
	if k < 0 || gcra < 0 || len(res.ceilings) == 0 {
		return 0, false
	}
	runs := res.cells[k][gcra].runs
	var rs []float64
	for r := range min(len(runs), len(res.ceilings)) {
		rs = append(rs, runs[r].perSecond/of(res.ceilings[r]))
	}
	return figures.Median(rs), len(rs) > 0
}

// ceilingRow writes the bar of the ceiling as a row of the bars' table:
// only its 100k g=256 cell has a figure.
func ceilingRow(p func(string, ...any), res *benchResults) {
	m, ok := res.ceilingRatio()
	if !ok {
		return
	}
	row := fmt.Sprintf("| %s ÷ redis-benchmark's pipelined EVALSHA (%d connections, %d deep, the server's ceiling) | ≥ %.2f× at 100k g=256 |", gcraName, ceilingConnections, ceilingDepth, ceilingGoal)
	k := res.ceilingCase()
	for j := range res.cases {
		cell := ""
		if j == k {
			cell = ratio(m)
			if m < ceilingGoal {
				cell = "**" + cell + " miss**"
			}
		}
		row += " " + cell + " |"
	}
	p("%s", row)
}

// ceilingText describes the ceilings measured in res, for the report.
func ceilingText(res *benchResults) string {
	if len(res.ceilings) == 0 {
		return "redis-benchmark was not found, so the pipelined ceiling was not measured: install Debian's `redis-tools` (`apt-get install redis-tools`; bench/run.sh does when it is missing)."
	}
	var pip, crowd, one []float64
	for _, c := range res.ceilings {
		pip, crowd, one = append(pip, c.pipelined), append(crowd, c.crowd), append(one, c.single)
	}
	text := fmt.Sprintf("The server's ceiling, by redis-benchmark (a C client) calling the bare script by EVALSHA on %s random keys from %d connections, medians of %d rounds: %s/s pipelined %d deep, %s/s one command per round trip.",
		figures.Thousands(manyKeys), ceilingConnections, len(res.ceilings), figures.Thousands(figures.Median(pip)), ceilingDepth, figures.Thousands(figures.Median(one)))
	text += fmt.Sprintf(" Those are %s commands in flight, where the case it is compared with has %d goroutines, so at most %d: held to as many (%d connections %d deep), redis-benchmark made %s/s",
		figures.Thousands(ceilingConnections*ceilingDepth), crowdConnections*ceilingDepth, crowdConnections*ceilingDepth, crowdConnections, ceilingDepth, figures.Thousands(figures.Median(crowd)))
	if m, ok := res.gcraOver(func(c ceilingRun) float64 { return c.crowd }); ok {
		text += fmt.Sprintf(", and %s on %s keys at %d goroutines %s of that", gcraName, figures.Thousands(manyKeys), crowdConnections*ceilingDepth, ratio(m))
	}
	return text + "."
}
