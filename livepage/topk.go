package livepage

import (
	"cmp"
	"slices"
)

// This file holds the heavy-hitters summaries: Space-Saving (Metwally,
// Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", 2005) over a fixed number of counters, and
// the merge of several summaries into one.
//
// The bound. A summary of k counters that has counted n units keeps, for
// each identity it lists, an upper bound hi and a lower bound lo of the
// identity's true count c: lo <= c <= hi, and hi - lo <= n/k. Any identity
// it does not list has c <= rest, where rest <= n/k (rest is 0 while
// fewer than k identities were seen: the summary is then exact). So every
// identity whose true count exceeds n/k is listed, and every reported
// count is at most n/k above the truth.
//
// The merge of summaries of n1, n2, ... units (the processes of a fleet,
// or one process's last two windows) adds, per identity, each summary's hi
// (or its rest, where the identity is not listed) and each summary's lo
// (or 0): hi - lo <= n1/k + n2/k + ... = n/k, for n the units of all. It
// keeps the k identities of highest hi and lifts its rest to the highest
// hi it drops, which is at most n/k too (k listed counts each above it
// would sum past n). The merged summary keeps the single summary's bound
// for the whole traffic: counts at most n/k above the truth, every
// identity above n/k listed.

// counter is one identity's count in a summary.
type counter struct {
	id string
	hi uint64 // an upper bound of the identity's count
	lo uint64 // a lower bound: hi less the count it inherited
}

// spaceSaving is a Space-Saving summary of at most k counters, kept as a
// min-heap by hi with an index from identity to heap position: an update
// costs O(log k) and allocates only when a new identity takes a counter
// (the map's entry). Not safe for concurrent use.
type spaceSaving struct {
	k     int
	n     uint64 // units counted
	heap  []counter
	index map[string]int
}

func newSpaceSaving(k int) *spaceSaving {
	return &spaceSaving{k: k, heap: make([]counter, 0, k), index: make(map[string]int, k)}
}

// add counts w units of id.
func (s *spaceSaving) add(id string, w uint64) {
	s.n += w
	if i, ok := s.index[id]; ok {
		s.heap[i].hi += w
		s.heap[i].lo += w
		s.down(i)
		return
	}
	if len(s.heap) < s.k {
		s.heap = append(s.heap, counter{id: id, hi: w, lo: w})
		s.index[id] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	// the identity takes the smallest counter, and its count as error
	root := &s.heap[0]
	delete(s.index, root.id)
	root.id, root.hi, root.lo = id, root.hi+w, w
	s.index[id] = 0
	s.down(0)
}

// rest returns the bound on the count of an identity the summary does not
// list: its smallest counter once every counter is taken, else 0.
func (s *spaceSaving) rest() uint64 {
	if len(s.heap) < s.k {
		return 0
	}
	return s.heap[0].hi
}

// reset empties the summary, keeping its memory.
func (s *spaceSaving) reset() {
	clear(s.index)
	s.heap = s.heap[:0]
	s.n = 0
}

// snapshot returns the summary's contents, highest count first.
func (s *spaceSaving) snapshot() summary {
	c := slices.Clone(s.heap)
	sortCounters(c)
	return summary{N: s.n, Rest: s.rest(), Counters: c}
}

func (s *spaceSaving) less(i, j int) bool { return s.heap[i].hi < s.heap[j].hi }

func (s *spaceSaving) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.index[s.heap[i].id] = i
	s.index[s.heap[j].id] = j
}

func (s *spaceSaving) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *spaceSaving) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(s.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(s.heap) && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// summary is a summary's contents: the units it counted (N), the bound on
// an unlisted identity's count (Rest) and its counters, highest hi first.
type summary struct {
	N        uint64
	Rest     uint64
	Counters []counter
}

// sortCounters orders c by hi, highest first, then by identity.
func sortCounters(c []counter) {
	slices.SortFunc(c, func(a, b counter) int {
		if r := cmp.Compare(b.hi, a.hi); r != 0 {
			return r
		}
		return cmp.Compare(a.id, b.id)
	})
}

// merge returns the summary of the traffic of all of ss, keeping the k
// identities of highest count; see the bound at the top of this file.
func merge(k int, ss ...summary) summary {
	var out summary
	listed := map[string]int{}
	for _, s := range ss {
		out.N += s.N
		out.Rest += s.Rest
		for _, c := range s.Counters {
			if _, ok := listed[c.id]; !ok {
				listed[c.id] = len(out.Counters)
				out.Counters = append(out.Counters, counter{id: c.id})
			}
		}
	}
	for _, s := range ss {
		in := make(map[string]bool, len(s.Counters))
		for _, c := range s.Counters {
			in[c.id] = true
			m := &out.Counters[listed[c.id]]
			m.hi += c.hi
			m.lo += c.lo
		}
		for i := range out.Counters {
			if !in[out.Counters[i].id] {
				out.Counters[i].hi += s.Rest
			}
		}
	}
	sortCounters(out.Counters)
	if len(out.Counters) > k {
		out.Rest = max(out.Rest, out.Counters[k].hi)
		out.Counters = out.Counters[:k]
	}
	return out
}
