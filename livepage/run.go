package livepage

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// run samples the counters each second, rotates the windows, and
// publishes to the fleet, until Close.
func (r *Recorder) run() {
	defer close(r.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastWindow, lastHist, lastPublish := time.Now(), time.Now(), time.Now()
	var publishing sync.WaitGroup
	defer publishing.Wait()
	for {
		select {
		case <-r.stop:
			return
		case now := <-tick.C:
			r.sample(now)
			if now.Sub(lastWindow) >= r.opts.Window {
				r.rotate()
				lastWindow = now
			}
			if now.Sub(lastHist) >= time.Minute {
				r.store.latency.rotate()
				lastHist = now
			}
			if r.opts.Fleet != nil && now.Sub(lastPublish) >= r.opts.PublishEvery {
				lastPublish = now
				payload := r.publication(now)
				publishing.Wait() // one publication at a time
				publishing.Add(1)
				go func() {
					defer publishing.Done()
					ctx, cancel := context.WithTimeout(context.Background(), r.opts.PublishEvery)
					defer cancel()
					_ = r.opts.Fleet.Publish(ctx, r.opts.Process, payload, 3*r.opts.PublishEvery)
				}()
			}
		}
	}
}

// sortedRules returns the rules seen, by name.
func (r *Recorder) sortedRules() []*ruleStats {
	m := *r.rules.Load()
	out := make([]*ruleStats, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// sample appends each rule's decisions since the last sample to its
// series.
func (r *Recorder) sample(now time.Time) {
	for _, s := range r.sortedRules() {
		cur := [3]uint64{s.allowed.Load(), s.denied.Load(), s.shadowDen.Load()}
		s.mu.Lock()
		var point [3]uint32
		for i := range cur {
			point[i] = uint32(min(cur[i]-s.last[i], 1<<32-1))
		}
		s.last = cur
		s.series[s.head] = point
		s.head = (s.head + 1) % seriesLen
		s.filled = min(s.filled+1, seriesLen)
		s.at = now
		s.mu.Unlock()
	}
}

// rotate starts a new window of offenders in every rule.
func (r *Recorder) rotate() {
	for _, s := range r.sortedRules() {
		s.mu.Lock()
		s.deniedPrev, s.deniedNow = s.deniedNow, s.deniedPrev
		s.deniedNow.reset()
		s.nearPrev, s.near = s.near, s.nearPrev
		s.near.reset()
		s.mu.Unlock()
	}
}

// offenders returns the rule's denied and near summaries over the current
// and last window.
func (r *Recorder) offenders(s *ruleStats) (denied, near summary) {
	s.mu.Lock()
	a, b := s.deniedNow.snapshot(), s.deniedPrev.snapshot()
	c, d := s.near.snapshot(), s.nearPrev.snapshot()
	s.mu.Unlock()
	return merge(r.opts.Counters, a, b), merge(r.opts.Counters, c, d)
}

// publication returns the JSON this process publishes to the fleet.
func (r *Recorder) publication(now time.Time) []byte {
	p := published{Process: r.opts.Process, At: now.UnixMilli(), Rules: map[string]publishedRule{}}
	for _, s := range r.sortedRules() {
		d, _ := r.offenders(s)
		p.Rules[s.name] = toPublished(d)
	}
	b, _ := json.Marshal(p) // plain values: never fails
	return b
}

// fleetView reads the fleet and merges each rule's summaries; it returns
// the processes that published.
func (r *Recorder) fleetView(ctx context.Context) (map[string]summary, []string, error) {
	raw, err := r.opts.Fleet.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	byRule := map[string][]summary{}
	var procs []string
	for _, b := range raw {
		var p published
		if err := json.Unmarshal(b, &p); err != nil {
			continue // a publication of another version: skip it
		}
		procs = append(procs, p.Process)
		for name, pr := range p.Rules {
			s, err := pr.summary()
			if err != nil {
				continue
			}
			byRule[name] = append(byRule[name], s)
		}
	}
	out := make(map[string]summary, len(byRule))
	for name, ss := range byRule {
		out[name] = merge(r.opts.Counters, ss...)
	}
	sort.Strings(procs)
	return out, procs, nil
}
