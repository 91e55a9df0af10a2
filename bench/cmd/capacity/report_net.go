package main

import (
	"fmt"
	"strings"

	"github.com/ratekit/ratekit/bench/internal/figures"
)

func (r *report) network(p *printer) {
	n := r.opts.replicas
	p.f(sections[5])
	p.f("")
	p.f("Bytes per decision × rate × 8, into Redis (requests; the replicas' egress) and out of it (replies;")
	p.f("their ingress), as TCP payload: headers and TLS add to it. The fleet is %d replicas sharing the", n)
	p.f("rate evenly; per replica is the total ÷ %d. Each line comes from the row named, on %s keys.", n, figures.Thousands(float64(r.opts.manyKeys)))
	p.f("")
	p.f("| algorithm | mode | from | bytes in + out a decision | at 1M decisions/s: in, out (per replica) | at 10M decisions/s: in, out (per replica) |")
	p.f("|---|---|---|---:|---:|---:|")
	for _, i := range r.manyRows() {
		row := r.rows[i]
		in, out := row.stat(sample.bytesIn).med, row.stat(sample.bytesOut).med
		cells := make([]string, len(netRates))
		for k, rate := range netRates {
			ti, to := mbits(in, rate), mbits(out, rate)
			cells[k] = fmt.Sprintf("%s, %s Mbit/s (%s, %s)", mbitStr(ti), mbitStr(to), mbitStr(ti/float64(n)), mbitStr(to/float64(n)))
		}
		p.f("| %s | %s | %s | %.1f + %.1f | %s | %s |", row.c.algName(), row.c.mode, id(i), in, out, cells[0], cells[1])
	}
	p.f("")
	p.f("For example the first line at 1M/s: %s.", r.netExample())
	p.f("")
}

// mbitStr formats Mbit/s with three significant figures or so.
func mbitStr(x float64) string {
	switch {
	case x >= 100:
		return figures.Thousands(x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func (r *report) netExample() string {
	is := r.manyRows()
	if len(is) == 0 {
		return "no row"
	}
	row := r.rows[is[0]]
	in := row.stat(sample.bytesIn).med
	return fmt.Sprintf("%.1f bytes × 1,000,000/s × 8 = %s Mbit/s into Redis, %s Mbit/s from each of %d replicas",
		in, mbitStr(mbits(in, 1e6)), mbitStr(mbits(in, 1e6)/float64(r.opts.replicas)), r.opts.replicas)
}

func (r *report) caveats(p *printer) {
	p.f(sections[6])
	p.f("")
	p.f("- The %s rows (%s) are Redis's side of a server process that shares these CPUs with the", server, r.ids(server))
	p.f("  load generator and redis-server: their decisions/s are the gRPC client's through it, and say little")
	p.f("  about a dedicated server; their Redis figures are what to plan from. The server shares pipelines")
	p.f("  among concurrent calls (`RATEKIT_BATCH=4`), so, like the batched rows, they depend on the calls in flight;")
	p.f("  so do the %s rows: over a `*redis.Client` concurrent reservations share pipelined round trips", reservation)
	p.f("  (up to 8 in flight). Over one server the calls of a round trip go as one script run, each run in turn")
	p.f("  by the same script body (package `internal/pipebatch`): *script calls* below 1.")
	p.f("- The %s rows (%s) count one reservation a decision, never slept to: a caller that sleeps to", reservation, r.ids(reservation))
	p.f("  its turn adds no Redis call, one that gives a turn back (`Reservation.Cancel`) adds a script call,")
	p.f("  and a pause (`Limiter.Pause`, a 429's Retry-After) adds one that publishes it; those are not measured here.")
	p.f("- One redis-server on loopback, sharing its CPUs with the load: on a dedicated master the same")
	p.f("  decisions cost less CPU, and loopback has no latency, so the client-side decisions/s here say")
	p.f("  little about a networked deployment. Regenerate this file on the machine you plan for.")
	p.f("- Redis 7.x executes commands on one thread; io-threads were not used (off by default), so one")
	p.f("  master is one core. With io-threads, reading and writing sockets moves to other threads and")
	p.f("  the process CPU per decision is no longer bounded by one core; execution still is.")
	p.f("- Redis Cluster adds what one server does not have: the client routes by slot, follows MOVED and")
	p.f("  ASK redirections, and batching (when asked for over a ClusterClient) makes a pipeline per node,")
	p.f("  so a fleet's pipelines are shorter and a master sees more, smaller round trips than here.")
	p.f("  Batched figures are therefore optimistic for Cluster; unbatched ones carry over.")
	p.f("- Batched figures depend on concurrency: at %d goroutines on one process many calls share a", r.opts.goroutines)
	p.f("  pipeline (and for GCRA one script call); a replica with fewer calls in flight shares less.")
	p.f("- Plans assume keys spread evenly over the slots. A hot key is bounded by its own master, see its cap.")
	p.f("- On %s keys each key is decided about %.1f times a run (decisions ÷ keys) and its first",
		figures.Thousands(float64(r.opts.manyKeys)), float64(r.opts.decisions)/float64(r.opts.manyKeys))
	p.f("  decision creates it, so the many-keys rows include creating keys and setting their expiries.")
}

// ids returns the ids of the rows of mode m, as "R21, R22".
func (r *report) ids(m mode) string {
	var out []string
	for i, row := range r.rows {
		if row.c.mode == m {
			out = append(out, id(i))
		}
	}
	if len(out) == 0 {
		return "none measured"
	}
	return strings.Join(out, ", ")
}
