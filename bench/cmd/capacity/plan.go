package main

import "math"

// planRates are the fleet-wide decisions/s the report plans for.
var planRates = []float64{100_000, 1_000_000, 10_000_000}

// netRates are the totals of the network figures.
var netRates = []float64{1_000_000, 10_000_000}

// masterPlan is how many masters serve rate decisions/s when each costs
// cpuUS µs of a master's process CPU and a master is planned at headroom
// of one core.
type masterPlan struct {
	rate, cpuUS, headroom float64
	cores                 float64 // rate × cpuUS: cores busy at rate
	masters               int     // ⌈cores / headroom⌉
}

// planMasters returns the plan, or false when there is no CPU figure to
// plan from.
func planMasters(rate, cpuUS, headroom float64) (masterPlan, bool) {
	if cpuUS <= 0 || headroom <= 0 {
		return masterPlan{}, false
	}
	cores := rate * cpuUS / 1e6
	return masterPlan{rate: rate, cpuUS: cpuUS, headroom: headroom, cores: cores,
		masters: int(math.Ceil(cores/headroom - 1e-9))}, true
}

// perSecond returns how many events of us µs each one core runs in a
// second, or false when us is not positive.
func perSecond(us float64) (float64, bool) {
	if us <= 0 {
		return 0, false
	}
	return 1e6 / us, true
}

// leaseCap is a leased hot key's cap: Redis spends perCallUS µs on each
// lease call and sees callsPerDecision of them a decision.
type leaseCap struct {
	perCallUS, callsPerDecision float64
	usPerDecision               float64 // perCallUS × callsPerDecision
	cap                         float64 // 1e6 / usPerDecision
}

// leasedCap returns the cap, or false without a cost to derive it from.
// With no lease call at all (a run shorter than one lease) it is false
// too: the run says nothing about how often leases are taken.
func leasedCap(perCallUS, callsPerDecision float64) (leaseCap, bool) {
	us := perCallUS * callsPerDecision
	c, ok := perSecond(us)
	if !ok {
		return leaseCap{}, false
	}
	return leaseCap{perCallUS: perCallUS, callsPerDecision: callsPerDecision, usPerDecision: us, cap: c}, true
}

// mbits returns the Mbit/s that bytesPerDecision bytes a decision make at
// rate decisions/s.
func mbits(bytesPerDecision, rate float64) float64 { return bytesPerDecision * rate * 8 / 1e6 }

// overshoot returns the most units replicas leasing leaseSize units each
// admit over a limit per window, from leasestore.Store's bound:
// limit + (lease size − 1) × replicas.
func overshoot(leaseSize, replicas int) int { return max(leaseSize-1, 0) * replicas }
