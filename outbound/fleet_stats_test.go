package outbound_test

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// stats are the figures of one run, measured at the upstream over a window
// of it, and from the clients' waits.
type stats struct {
	maxWindow   int     // most arrivals in any one second, the whole run
	refused     int     // 429s in the window
	util        float64 // accepted per second in the window, over the limit then
	jain        float64 // Jain's fairness index of the clients' accepted requests in the window
	late        int     // arrivals after their deadline, the whole run
	lateBy      time.Duration
	p50, p99    time.Duration
	per         []float64 // accepted in the window, by client
	lastErr     string
	gaveUp, err int
}

// measure computes the stats of arrivals in [from, to) of the run started
// at start, under limit.
func measure(log []arrival, start time.Time, from, to time.Duration, limit int, clients []*childResult) stats {
	var s stats
	j := 0
	per := make([]float64, fleetSize)
	accepted := 0
	for i, a := range log {
		for j < len(log) && log[j].at.Before(a.at.Add(time.Second)) {
			j++
		}
		s.maxWindow = max(s.maxWindow, j-i)
		if a.at.After(a.deadline) {
			s.late++
			s.lateBy = max(s.lateBy, a.at.Sub(a.deadline))
		}
		if in := a.at.Sub(start); in < from || in >= to {
			continue
		}
		switch a.status {
		case http.StatusOK:
			accepted++
			per[a.client]++
		case http.StatusTooManyRequests:
			s.refused++
		}
	}
	s.util = float64(accepted) / (float64(limit) * (to - from).Seconds())
	s.jain = jain(per, clients)
	s.per = per
	var waits []time.Duration
	for _, c := range clients {
		if c == nil {
			continue
		}
		waits = append(waits, c.Waits...)
		s.gaveUp += c.GaveUp
		s.err += c.Errors
		if c.LastErr != "" {
			s.lastErr = c.LastErr
		}
	}
	slices.Sort(waits)
	if len(waits) > 0 {
		s.p50, s.p99 = waits[len(waits)/2], waits[len(waits)*99/100]
	}
	return s
}

// jain returns Jain's fairness index of the counts of the clients still
// alive: (Σx)² / (n Σx²), 1 when all are equal.
func jain(per []float64, clients []*childResult) float64 {
	var sum, sq float64
	n := 0
	for i, x := range per {
		if clients[i] == nil {
			continue
		}
		sum, sq, n = sum+x, sq+x*x, n+1
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(n) * sq)
}

func (s stats) String() string {
	return fmt.Sprintf("max/1s %d | 429s %d | util %.1f%% | Jain %.3f | wait p50 %v p99 %v | gave up %d | late %d (by up to %v) | errors %d",
		s.maxWindow, s.refused, 100*s.util, s.jain, s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond), s.gaveUp, s.late, s.lateBy, s.err)
}

// row logs s as a row of the measured table (docs/outbound.md).
func row(t *testing.T, name string, s stats) {
	t.Helper()
	t.Logf("| %s | %d | %d | %.1f%% | %.3f | %v | %v | %d |", name, s.maxWindow, s.refused, 100*s.util, s.jain,
		s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond), s.gaveUp)
	t.Log(s.String(), "| by client ", s.per, " ", s.lastErr)
}

// gaps returns the sorted gaps between successive accepted arrivals in
// [from, to) of the run.
func gaps(log []arrival, start time.Time, from, to time.Duration) []time.Duration {
	var out []time.Duration
	var prev time.Time
	for _, a := range log {
		if in := a.at.Sub(start); in < from || in >= to || a.status != http.StatusOK {
			continue
		}
		if !prev.IsZero() {
			out = append(out, a.at.Sub(prev))
		}
		prev = a.at
	}
	slices.Sort(out)
	return out
}

// table asks for the runs that only fill the measured table.
var table = flag.Bool("outbound.table", false, "also run the fleet scenarios measured for docs/outbound.md only")
