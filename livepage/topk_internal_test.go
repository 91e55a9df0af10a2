package livepage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// zipfStream returns n identities drawn from a Zipf law (s = 1.1) over
// ids identities, from a fixed seed, and their exact counts.
func zipfStream(n, ids int) ([]string, map[string]uint64) {
	r := rand.New(rand.NewPCG(54, 2005))
	z := rand.NewZipf(r, 1.1, 1, uint64(ids-1))
	names := make([]string, ids)
	for i := range names {
		names[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16, i>>8&255, i&255)
	}
	stream := make([]string, n)
	exact := map[string]uint64{}
	for i := range stream {
		stream[i] = names[z.Uint64()]
		exact[stream[i]]++
	}
	return stream, exact
}

// trueTop returns the identities of the n highest exact counts.
func trueTop(exact map[string]uint64, n int) []counter {
	all := make([]counter, 0, len(exact))
	for id, c := range exact {
		all = append(all, counter{id: id, hi: c, lo: c})
	}
	sortCounters(all)
	return all[:n]
}

// checkBound fails t unless s keeps its stated bound against exact: every
// listed count within [lo, hi] with hi-lo <= n/k, every identity above
// n/k listed, and the top 10 those of the exact counts. It returns the
// largest overcount found.
func checkBound(t *testing.T, name string, s summary, k int, exact map[string]uint64) uint64 {
	t.Helper()
	bound := s.N / uint64(k)
	listed := map[string]counter{}
	var worst uint64
	for _, c := range s.Counters {
		listed[c.id] = c
		tc := exact[c.id]
		if c.lo > tc || tc > c.hi || c.hi-c.lo > bound {
			t.Errorf("%s: %s counted [%d, %d], true %d, bound %d", name, c.id, c.lo, c.hi, tc, bound)
		}
		worst = max(worst, c.hi-tc)
	}
	for id, c := range exact {
		if _, ok := listed[id]; !ok && (c > bound || c > s.Rest) {
			t.Errorf("%s: %s (true %d) is not listed, bound %d, rest %d", name, id, c, bound, s.Rest)
		}
	}
	if s.Rest > bound {
		t.Errorf("%s: rest %d above the bound %d", name, s.Rest, bound)
	}
	want := trueTop(exact, 10)
	got := s.Counters[:10]
	for i := range want {
		if got[i].id != want[i].id {
			t.Errorf("%s: top 10 #%d is %s (%d), want %s (%d)", name, i+1, got[i].id, got[i].hi, want[i].id, want[i].hi)
		}
	}
	return worst
}

// TestSpaceSavingZipf counts a million requests over 100,000 identities
// with the default number of counters, against exact counts.
func TestSpaceSavingZipf(t *testing.T) {
	const n, ids, k = 1_000_000, 100_000, DefaultCounters
	stream, exact := zipfStream(n, ids)
	s := newSpaceSaving(k)
	for _, id := range stream {
		s.add(id, 1)
	}
	snap := s.snapshot()
	if snap.N != n {
		t.Fatalf("counted %d, want %d", snap.N, n)
	}
	worst := checkBound(t, "single", snap, k, exact)
	t.Logf("k=%d n=%d identities=%d: bound n/k=%d, largest overcount %d, rest %d", k, n, len(exact), n/k, worst, snap.Rest)
	for i, c := range snap.Counters[:10] {
		t.Logf("#%-2d %-16s true %6d  reported %6d  (lo %6d)", i+1, c.id, exact[c.id], c.hi, c.lo)
	}
}

// TestSpaceSavingFixedMemory shows the summary's memory does not grow
// with the identities: ten times more leave it as large.
func TestSpaceSavingFixedMemory(t *testing.T) {
	const k = DefaultCounters
	sizes := map[int][2]int{}
	for _, ids := range []int{10_000, 100_000} {
		stream, _ := zipfStream(200_000, ids)
		s := newSpaceSaving(k)
		for _, id := range stream {
			s.add(id, 1)
		}
		sizes[ids] = [2]int{cap(s.heap), len(s.index)}
	}
	if sizes[10_000] != sizes[100_000] || sizes[100_000][0] != k || sizes[100_000][1] > k {
		t.Errorf("heap capacity and index size by identities: %v, want %d each", sizes, k)
	}
}

// TestMergeThreeProcesses splits one stream across three summaries, as
// three processes of a fleet see it, and merges them: the result keeps
// the single summary's bound for the whole stream, finds the same top 10,
// and differs from the single summary's counts by at most n/k.
func TestMergeThreeProcesses(t *testing.T) {
	const n, ids, k = 1_000_000, 100_000, DefaultCounters
	stream, exact := zipfStream(n, ids)
	single := newSpaceSaving(k)
	procs := []*spaceSaving{newSpaceSaving(k), newSpaceSaving(k), newSpaceSaving(k)}
	r := rand.New(rand.NewPCG(3, 3))
	for _, id := range stream {
		single.add(id, 1)
		procs[r.IntN(len(procs))].add(id, 1)
	}
	merged := merge(k, procs[0].snapshot(), procs[1].snapshot(), procs[2].snapshot())
	if merged.N != n || len(merged.Counters) != k {
		t.Fatalf("merged %d units in %d counters, want %d in %d", merged.N, len(merged.Counters), n, k)
	}
	worst := checkBound(t, "merged", merged, k, exact)
	one := single.snapshot()
	bySingle := map[string]uint64{}
	for _, c := range one.Counters {
		bySingle[c.id] = c.hi
	}
	for _, c := range merged.Counters[:10] {
		d := max(c.hi, bySingle[c.id]) - min(c.hi, bySingle[c.id])
		if d > n/k {
			t.Errorf("%s: merged %d, single %d: apart by more than n/k = %d", c.id, c.hi, bySingle[c.id], n/k)
		}
	}
	if !slices.EqualFunc(merged.Counters[:10], one.Counters[:10], func(a, b counter) bool { return a.id == b.id }) {
		t.Error("the merged top 10 differs from the single summary's")
	}
	t.Logf("three processes merged: bound n/k=%d, largest overcount %d, rest %d", n/k, worst, merged.Rest)
}

// TestMergeExactWhenNotFull shows summaries that never filled merge
// exactly.
func TestMergeExactWhenNotFull(t *testing.T) {
	a, b := newSpaceSaving(4), newSpaceSaving(4)
	for _, id := range []string{"x", "x", "y"} {
		a.add(id, 1)
	}
	for _, id := range []string{"x", "z", "z", "z"} {
		b.add(id, 1)
	}
	m := merge(4, a.snapshot(), b.snapshot())
	got := fmt.Sprint(m.Counters)
	if want := "[{x 3 3} {z 3 3} {y 1 1}]"; got != want || m.Rest != 0 || m.N != 7 {
		t.Errorf("merged %s rest %d n %d, want %s rest 0 n 7", got, m.Rest, m.N, want)
	}
}
