package redisstore

import "time"

// How a batcher decides whether a call may open one more pipeline. More
// pipelines in flight hide a link's latency: while one crosses the
// network, Redis serves another. They hide nothing once Redis, or this
// process, is what the calls wait for: then every further pipeline only
// splits the calls into shorter pipelines, each costing both sides a round
// trip's system calls and Redis a script call, so that a saturated machine
// makes fewer decisions. A pipeline's round trip tells which: across an
// idle link it stays near the shortest seen, whatever the latency; behind
// a saturated server or client it grows with the queue. So up to
// openFreely pipelines open whenever a slot is free (one in flight while
// the next fills, and Redis never waits for the client between them), and
// a further one opens only while the smoothed round trip is within
// congestionFactor of the shortest seen lately, as TCP Vegas paces a
// connection by its round trip's growth over the base one.
//
// A pipeline beyond the first openFreely must also be worth its round
// trip: carry at least 1/extraShare of the calls in flight or queued (the
// batcher's load, averaged over the calls that queue). Without that, a
// slot, once open, stays open for as long as calls keep queueing, and
// under a crowd the slots split it unevenly: the pipeline that returns
// first hands its slot to the few calls queued since the last one left,
// its own callers then queue behind it, and a round trip goes out for
// every handful of calls while most wait for a slot. So a call opens such
// a pipeline, and a returning one passes its slot on, only for a batch
// that large; otherwise the slot is freed and the queued calls go with the
// next of the pipelines still in flight (at least openFreely) to return.
// Through a link of 250µs each way, the batched store on one key at 64
// goroutines made 3.3-3.7 times the decisions a second of a bare script
// with a share of a third, 3.1 times without the rule; a quarter made
// 3.65-3.86 times, and 16 goroutines a tenth more than with a third
// (docs/measurements.md).
const (
	openFreely       = 2
	extraShare       = 4
	loadSmoothing    = 16
	congestionFactor = 2
	// rttWindow is how long a shortest round trip counts: the gauge keeps
	// the shortest of the current and the previous window, so that one seen
	// under other conditions (another server after a failover, an idle
	// moment on a path since grown longer) is forgotten within two windows.
	rttWindow = 10 * time.Second
)

// mayOpen reports whether a call may open a further pipeline, under b.mu:
// a slot is free, and either fewer than openFreely are in flight or the
// queued calls are worth another pipeline and the round trip is not
// congested.
func (b *batcher) mayOpen() bool {
	switch {
	case b.inflight >= b.parallel:
		return false
	case b.inflight < openFreely:
		return true
	case !b.worthExtra():
		return false
	}
	return !b.rtt.congested()
}

// worthExtra reports whether the calls queued are enough for a pipeline
// beyond the first openFreely, under b.mu: at least 1/extraShare of the
// load.
func (b *batcher) worthExtra() bool {
	return len(b.pending)*extraShare*loadSmoothing >= b.load
}

// returned counts in a pipeline of batch, sent at sent, that has returned
// after rtt, under b.mu: its round trip, its calls out of those in flight;
// and returns the batch its slot passes to (see handOff), nil if none.
func (b *batcher) returned(batch []*batchCall, sent time.Time, rtt time.Duration) []*batchCall {
	b.rtt.observe(rtt, sent)
	b.sending -= len(batch)
	return b.handOff()
}

// handOff returns the batch that a pipeline which has returned passes its
// slot to, under b.mu: the calls queued, unless the batcher is closed or
// the pipeline is beyond the first openFreely and they are not worth it
// (see worthExtra); nil if the slot is to be freed.
func (b *batcher) handOff() []*batchCall {
	if b.closed || b.inflight > openFreely && !b.worthExtra() {
		return nil
	}
	return b.take()
}

// rttGauge follows the round trips of a batcher's pipelines, from the
// moment one is sent to the moment its replies are read: their smoothed
// value, and the shortest of the last two windows. Its methods are called
// under the batcher's mutex.
type rttGauge struct {
	min   [2]time.Duration // the current window's shortest, and the previous one's (0: none)
	since time.Time        // when the current window began
	srtt  time.Duration    // smoothed: each round trip moves it an eighth of the way
}

// observe adds the round trip rtt of a pipeline sent at sent.
func (g *rttGauge) observe(rtt time.Duration, sent time.Time) {
	if g.since.IsZero() || sent.Sub(g.since) > rttWindow {
		g.min[1], g.min[0], g.since = g.min[0], rtt, sent
	} else if rtt < g.min[0] {
		g.min[0] = rtt
	}
	if g.srtt == 0 {
		g.srtt = rtt
	} else {
		g.srtt += (rtt - g.srtt) / 8
	}
}

// congested reports whether the smoothed round trip is over
// congestionFactor times the shortest of late: pipelines wait in a queue,
// and one more would not be served sooner.
func (g *rttGauge) congested() bool {
	base := g.min[0]
	if g.min[1] > 0 && g.min[1] < base {
		base = g.min[1]
	}
	return base > 0 && g.srtt > congestionFactor*base
}
