package outbound

import (
	"context"
	"slices"
	"strconv"
	"time"
)

// fleetTTLBeats is how many heartbeats a member outlives its last one, and
// how many of the latest counts the learned size is the largest of: a
// Redis that restarted empty does not shrink the fleet until every live
// process has beaten again.
const fleetTTLBeats = 3

// heartbeatLoop beats the Limiter's heartbeat until Close, then leaves the
// fleet.
func (l *Limiter) heartbeatLoop() {
	key := l.cfg.prefix + l.name + ":fleet"
	ttl := strconv.FormatInt((fleetTTLBeats * l.cfg.heartbeat).Microseconds(), 10)
	var counts [fleetTTLBeats]int64
	ticker := time.NewTicker(l.cfg.heartbeat)
	defer ticker.Stop()
	for i := 0; ; i++ {
		if n, err := l.beat(key, ttl, "1"); err == nil {
			counts[i%fleetTTLBeats] = n
			l.learned.Store(slices.Max(counts[:]))
		}
		l.sweep()
		select {
		case <-l.stop:
			_, _ = l.beat(key, ttl, "0")
			return
		case <-ticker.C:
		}
	}
}

// beat runs one heartbeat (mode "1") or leaves the fleet ("0"), and returns
// the fleet's size.
func (l *Limiter) beat(key, ttl, mode string) (int64, error) {
	ctx := context.Background()
	v, err := l.call(ctx, callFunc(func(ctx context.Context) (any, error) {
		return fleetScript.Run(ctx, l.client, []string{key}, l.member, ttl, mode).Result()
	}))
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, nil
	}
	return n, nil
}

// FleetSize returns how many processes this Limiter counts in its fleet:
// the larger of the size told ([WithFleetSize]) and the size learned from
// the heartbeats, 0 while neither is known.
func (l *Limiter) FleetSize() int { return l.fleetShare() }
