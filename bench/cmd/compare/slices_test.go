package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSliceOfSpreadsEveryDecision(t *testing.T) {
	for _, n := range []int64{0, 1, 4, 5, 6, 99, 100, 101, 7919} {
		var sum, lo, hi int64 = 0, n, 0
		for s := range runSlices {
			k := sliceOf(n, s, runSlices)
			sum += k
			lo, hi = min(lo, k), max(hi, k)
		}
		if sum != n || hi-lo > 1 {
			t.Errorf("n=%d: slices sum to %d, from %d to %d; want %d, at most 1 apart", n, sum, lo, hi, n)
		}
	}
}

func TestMergeRuns(t *testing.T) {
	boom := errors.New("boom")
	parts := []runResult{
		{n: 3, allowed: 2, denied: 1, elapsed: time.Second, mallocs: 6, cpu: 2 * time.Millisecond, cpuOK: true},
		{n: 2, allowed: 1, errors: 1, firstErr: boom, elapsed: time.Second, mallocs: 4, cpu: time.Millisecond, cpuOK: true},
	}
	lat := []time.Duration{5, 1, 4, 2, 3}
	r := mergeRuns(parts, lat)
	if r.n != 5 || r.allowed != 3 || r.denied != 1 || r.errors != 1 || !errors.Is(r.firstErr, boom) {
		t.Errorf("counts %+v", r)
	}
	if r.elapsed != 2*time.Second || r.mallocs != 10 || r.cpu != 3*time.Millisecond || !r.cpuOK {
		t.Errorf("sums: elapsed %v, mallocs %d, cpu %v (ok %v)", r.elapsed, r.mallocs, r.cpu, r.cpuOK)
	}
	if r.perSecond != 2 { // (3 allowed + 1 denied) over 2 s; errors are not decisions
		t.Errorf("perSecond %v, want 2", r.perSecond)
	}
	if r.p50 != 3 || r.p99 != 5 {
		t.Errorf("p50 %v, p99 %v over every part's latencies; want 3, 5", r.p50, r.p99)
	}
	parts[1].cpuOK = false
	if mergeRuns(parts, nil).cpuOK {
		t.Error("cpuOK with a part whose CPU could not be read")
	}
}

// A round cuts each contender's run into slices taken in turn, so that
// contenders share the machine's moments; each makes exactly its planned
// decisions, on keys taken in turn from where its last slice stopped.
func TestMeasureRoundInterleavesSlices(t *testing.T) {
	const contenders, keys = 3, 7
	var (
		mu    sync.Mutex
		order []int      // the contender of each decision, in time
		seen  [][]string // each contender's keys, in order
	)
	seen = make([][]string, contenders)
	open := make([]func() decideFunc, contenders)
	for ci := range open {
		open[ci] = func() decideFunc {
			return func(key string) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, ci)
				seen[ci] = append(seen[ci], key)
				return true, nil
			}
		}
	}
	var all strings.Builder
	ends := make([]int32, keys)
	for i := range ends {
		all.WriteString("k" + strconv.Itoa(i))
		ends[i] = int32(all.Len())
	}
	ks := &keySet{all: all.String(), ends: ends}
	keysOf := func(int, int) *keySet { return ks }
	planned := []int64{10, 12, 23}
	plan := func(_, ci int) int64 { return planned[ci] }
	lat := make([][]time.Duration, contenders)
	const round, rounds = 1, 3
	out, err := measureRound(context.Background(), nil, open, keysOf, 0, benchCase{g: 1}, round, rounds, plan, lat)
	if err != nil {
		t.Fatal(err)
	}
	for ci, rr := range out {
		if rr.planned != planned[ci] || rr.run.n != planned[ci] || rr.run.allowed != planned[ci] {
			t.Errorf("contender %d: planned %d, ran %d, allowed %d; want %d", ci, rr.planned, rr.run.n, rr.run.allowed, planned[ci])
		}
		if err := rr.run.check(); err != nil {
			t.Error(err)
		}
		base := round * keys / rounds
		for i, key := range seen[ci] {
			if want := ks.key((base + i) % keys); key != want {
				t.Errorf("contender %d, decision %d: key %s, want %s (keys in turn across slices)", ci, i, key, want)
				break
			}
		}
	}
	// the contenders take turns: every contender's slice s runs before
	// any contender's slice s+1
	made := make([]int64, contenders)
	last := 0
	for i, ci := range order {
		s, end := 0, sliceOf(planned[ci], 0, runSlices)
		for made[ci] >= end {
			s++
			end += sliceOf(planned[ci], s, runSlices)
		}
		made[ci]++
		if s < last {
			t.Fatalf("decision %d: contender %d in its slice %d after another's slice %d", i, ci, s, last)
		}
		last = s
	}
	if last != runSlices-1 {
		t.Errorf("the last decision in slice %d, want %d", last, runSlices-1)
	}
}

// The order of the contenders changes from slice to slice, so that none
// always follows the same other one.
func TestMeasureRoundVariesTheOrder(t *testing.T) {
	const contenders = 6
	var (
		mu    sync.Mutex
		order []int
	)
	open := make([]func() decideFunc, contenders)
	for ci := range open {
		open[ci] = func() decideFunc {
			return func(string) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(order) == 0 || order[len(order)-1] != ci {
					order = append(order, ci)
				}
				return true, nil
			}
		}
	}
	ks := &keySet{all: "k", ends: []int32{1}}
	plan := func(int, int) int64 { return runSlices } // one decision a slice
	lat := make([][]time.Duration, contenders)
	if _, err := measureRound(context.Background(), nil, open, func(int, int) *keySet { return ks }, 0, benchCase{g: 1}, 0, 1, plan, lat); err != nil {
		t.Fatal(err)
	}
	// how often each contender ran right after each other one, within a
	// slice or across slices
	pairs := make(map[[2]int]int)
	most := 0
	for i := 1; i < len(order); i++ {
		p := [2]int{order[i-1], order[i]}
		pairs[p]++
		most = max(most, pairs[p])
	}
	if most >= runSlices-1 { // in order of a rotation, most pairs recur in every slice
		t.Errorf("a contender ran right after the same other one %d times in %d slices: %v", most, runSlices, order)
	}
}
