package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/bench/internal/proccpu"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/figures"
)

// sample is one run of one case: what the client counted and what the
// server spent.
type sample struct {
	load      loadResult
	server    snapshot // the server's side of the run (see during)
	leaseSize int      // units a lease takes; 0 when not leasing
}

// perDecision divides x by the run's decisions.
func (s sample) perDecision(x float64) float64 {
	if s.load.decisions == 0 {
		return 0
	}
	return x / float64(s.load.decisions)
}

// The per-decision figures of a sample.
func (s sample) cpuUS() float64 {
	return s.perDecision(float64(s.server.cpu) / float64(time.Microsecond))
}
func (s sample) scriptUS() float64    { return s.perDecision(float64(s.server.scriptStats().usec)) }
func (s sample) scriptCalls() float64 { return s.perDecision(float64(s.server.scriptStats().calls)) }
func (s sample) processed() float64   { return s.perDecision(float64(s.server.processed)) }
func (s sample) bytesIn() float64     { return s.perDecision(float64(s.server.netIn)) }
func (s sample) bytesOut() float64    { return s.perDecision(float64(s.server.netOut)) }
func (s sample) rate() float64 {
	return float64(s.load.decisions) / s.load.elapsed.Seconds()
}
func (s sample) deniedShare() float64 { return s.perDecision(float64(s.load.denied)) }

// row is one case's samples, one a round.
type row struct {
	c       runCase
	samples []sample
}

// stat is the median of a figure over a row's samples, and its range.
type stat struct{ med, lo, hi float64 }

func (r row) stat(f func(sample) float64) stat {
	if len(r.samples) == 0 {
		return stat{}
	}
	xs := make([]float64, len(r.samples))
	for i, s := range r.samples {
		xs[i] = f(s)
	}
	med := figures.Median(xs) // sorts xs
	return stat{med: med, lo: xs[0], hi: xs[len(xs)-1]}
}

// cpuOK reports whether every sample read the server's CPU time.
func (r row) cpuOK() bool {
	for _, s := range r.samples {
		if !s.server.cpuOK {
			return false
		}
	}
	return len(r.samples) > 0
}

// measure runs every case once a round and returns a row per case; the
// server rows' ratekit-server runs from the first of them to the end.
func measure(ctx context.Context, client *redis.Client, pid int, o options) (_ []row, err error) {
	sp := &serverPath{bin: o.serverBin}
	defer func() {
		if cerr := sp.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cs := cases(o.manyKeys)
	rows := make([]row, len(cs))
	keys := map[keyCase]map[string][]string{}
	for i, c := range cs {
		rows[i].c = c
		if keys[c.keys] == nil {
			keys[c.keys] = map[string][]string{}
		}
		if keys[c.keys][c.keyspace()] == nil {
			keys[c.keys][c.keyspace()] = keysFor(c)
		}
	}
	for round := range o.rounds {
		for i, c := range cs {
			s, err := measureOne(ctx, client, pid, sp, c, keys[c.keys][c.keyspace()], o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			rows[i].samples = append(rows[i].samples, s)
			progress("round %d/%d %-34s %9.0f decisions/s, %6.2f µs CPU, %.4f script calls a decision",
				round+1, o.rounds, c, s.rate(), s.cpuUS(), s.scriptCalls())
		}
	}
	return rows, nil
}

// measureOne runs one case: a warm-up that loads the scripts, fills the
// connection pool and makes a leased key hot, then the measured load
// between snapshots of the server. Each run has a store or an outbound
// Limiter of its own; the server rows share sp's server.
func measureOne(ctx context.Context, client *redis.Client, pid int, sp *serverPath, c runCase, keys []string, o options) (sample, error) {
	var (
		newDecider func() decider
		leaseSize  int
	)
	switch c.mode {
	case reservation:
		lim, deciders, err := openReservations(ctx, client, benchRate)
		if err != nil {
			return sample{}, err
		}
		defer lim.Close()
		newDecider = deciders
	case server:
		deciders, err := sp.deciders(ctx, client, benchRate)
		if err != nil {
			return sample{}, err
		}
		newDecider = deciders
	default:
		limit := limitFor(c.alg)
		store, size, err := openStore(client, c.mode, limit)
		if err != nil {
			return sample{}, err
		}
		defer store.Close()
		newDecider, leaseSize = storeDeciders(ctx, store, limit), size
	}
	warm := load(newDecider, keys, o.goroutines, int64(8*o.goroutines), o.maxRun)
	if warm.errors > 0 {
		return sample{}, fmt.Errorf("warm-up: %d errors, the first: %w", warm.errors, warm.firstErr)
	}
	before, err := snap(ctx, client, pid)
	if err != nil {
		return sample{}, err
	}
	mid, err := snap(ctx, client, pid)
	if err != nil {
		return sample{}, err
	}
	res := load(newDecider, keys, o.goroutines, o.decisions, o.maxRun)
	after, err := snap(ctx, client, pid)
	if err != nil {
		return sample{}, err
	}
	if res.errors > 0 {
		return sample{}, fmt.Errorf("%d errors, the first: %w", res.errors, res.firstErr)
	}
	return sample{load: res, server: during(before, mid, after), leaseSize: leaseSize}, nil
}

// snap reads INFO stats and commandstats in one call, then the server
// process's CPU time.
func snap(ctx context.Context, client *redis.Client, pid int) (snapshot, error) {
	text, err := client.Info(ctx, "stats", "commandstats").Result()
	if err != nil {
		return snapshot{}, fmt.Errorf("INFO: %w", err)
	}
	s, err := parseInfo(text)
	if err != nil {
		return snapshot{}, err
	}
	s.cpu, s.cpuOK = proccpu.CPU(pid)
	return s, nil
}
