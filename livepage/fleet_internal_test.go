package livepage

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestFleetThreeProcessesOnRedis feeds one stream of denials to three
// Recorders, as three processes see a fleet's traffic, publishes each to a
// real redis-server and reads the fleet's view back: it keeps the bound
// of one summary over the whole stream, and finds the top 10 a single
// Recorder fed everything finds, within n/k of its counts.
func TestFleetThreeProcessesOnRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t)
	fleet, err := NewRedisFleet(client, "ratekit:")
	if err != nil {
		t.Fatal(err)
	}
	const n, ids, k = 1_000_000, 100_000, DefaultCounters
	stream, exact := zipfStream(n, ids)
	newRec := func(name string, f Fleet) *Recorder {
		// publications are made by the test, not the Recorders' goroutines
		r, err := NewRecorder(RecorderOptions{Fleet: f, Process: name, PublishEvery: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	single := newRec("single", nil)
	procs := []*Recorder{newRec("a", fleet), newRec("b", fleet), newRec("c", fleet)}
	e := core.DecisionEvent{Rule: "default", Result: core.Result{Limit: core.PerMinute(10)}}
	ctx := context.Background()
	pick := rand.New(rand.NewPCG(3, 3))
	for _, id := range stream {
		single.DecidedIdentity(ctx, e, id)
		procs[pick.IntN(len(procs))].DecidedIdentity(ctx, e, id)
	}
	var size int
	for _, p := range procs {
		payload := p.publication(p.started)
		size = max(size, len(payload))
		if err := fleet.Publish(ctx, p.opts.Process, payload, 60e9); err != nil {
			t.Fatal(err)
		}
	}
	view, processes, err := procs[0].fleetView(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(processes) != 3 {
		t.Fatalf("the fleet holds %v, want three processes", processes)
	}
	merged := view["default"]
	if merged.N != n {
		t.Fatalf("the fleet counted %d denials, want %d", merged.N, n)
	}
	worst := checkBound(t, "fleet", merged, k, exact)
	one, _ := single.offenders(single.sortedRules()[0])
	bySingle := map[string]uint64{}
	for _, c := range one.Counters {
		bySingle[c.id] = c.hi
	}
	for i, c := range merged.Counters[:10] {
		if c.id != one.Counters[i].id {
			t.Errorf("fleet #%d is %s, single #%d is %s", i+1, c.id, i+1, one.Counters[i].id)
		}
		if d := max(c.hi, bySingle[c.id]) - min(c.hi, bySingle[c.id]); d > n/k {
			t.Errorf("%s: fleet %d, single %d: apart by more than n/k = %d", c.id, c.hi, bySingle[c.id], n/k)
		}
	}
	t.Logf("fleet of 3 on Redis: bound n/k=%d, largest overcount %d; largest publication %d bytes", n/k, worst, size)
}
