package outbound

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/rediserr"
)

// DefaultPause is how long a 429 without Retry-After pauses its key.
const DefaultPause = time.Second

// Pause stops key for every process that shares the Limiter's Redis for d:
// no turn of the key acts before d has passed. Turns taken before that fall
// in the pause are void: the waits that hold them, in every process, take
// new turns after it (a [Reservation] keeps its time). A pause never
// shortens one already set. The other processes hear of it through Redis
// pub/sub at once, or at their next turn of the key; a process whose
// subscription was down reads it when subscribed again. While Redis cannot
// be reached, it pauses this process only, and returns the error.
func (l *Limiter) Pause(ctx context.Context, key string, d time.Duration) error {
	return l.pause(ctx, key, d, false, PauseCaller)
}

// Refused tells the Limiter that the upstream refused a request of key (a
// 429), and pauses the key for d as [Limiter.Pause] does. With adaptation on
// ([WithAIMD]) it also lowers the shared rate: once for all the refusals of
// turns handed out before the last lowering took effect, however many
// processes see them. The [Transport] calls it for every 429.
func (l *Limiter) Refused(ctx context.Context, key string, d time.Duration) error {
	return l.pause(ctx, key, d, true, PauseRetryAfter)
}

// pause pauses key for d, lowering the rate if congested.
func (l *Limiter) pause(ctx context.Context, key string, d time.Duration, congested bool, reason string) error {
	if d <= 0 {
		return fmt.Errorf("ratekit: outbound: pause of %v (want a positive time)", d)
	}
	if l.isClosed() {
		return ErrClosed
	}
	skey, err := l.Key(key)
	if err != nil {
		return err
	}
	ks := l.acquire(skey)
	defer l.release(ks)
	ks.notePause(l.now().Add(d)) // this process at once, whatever Redis says
	for _, o := range l.cfg.observers {
		o.Paused(l.name, d, reason)
	}
	cong := "0"
	if congested {
		cong = "1"
	}
	channel := l.channel
	if l.cfg.noSubscribe {
		channel = ""
	}
	v, err := l.run(ctx, pauseScript, skey, strconv.FormatInt(d.Microseconds(), 10), cong, channel)
	recv := l.now()
	if err != nil {
		if rediserr.NoPermission(err) {
			err = fmt.Errorf("%w to PUBLISH on channel %q, so the other processes were not told, though the pause applied in Redis (grant it: ACL SETUSER <user> &%s): %w",
				ErrNoPermission, l.channel, l.channel, err)
		}
		return fmt.Errorf("ratekit: outbound: pause: %w", err)
	}
	f, err := parseInts("pause", v, 3)
	if err != nil {
		return err
	}
	ks.notePause(recv.Add(time.Duration(f[0]) * time.Microsecond))
	if l.cfg.aimd != nil && f[1] > 0 {
		l.noteInterval(f[1])
	}
	return nil
}

// subscriber is a client that can subscribe to pub/sub channels.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// start starts the heartbeat and, through a client that can, the pause
// subscription.
func (l *Limiter) start() {
	l.wg.Go(l.heartbeatLoop)
	if sub, ok := l.client.(subscriber); ok && !l.cfg.noSubscribe {
		ps := sub.Subscribe(context.Background(), l.channel)
		l.wg.Go(func() { l.listen(ps) })
	}
}

// listen applies the pauses published on the Limiter's channel until
// Close. The PubSub subscribes again by itself after a lost connection;
// the pauses published meanwhile went unheard, so the Limiter then reads
// those of the keys it waits on from Redis (see recheck).
func (l *Limiter) listen(ps *redis.PubSub) {
	defer ps.Close()
	l.wg.Go(func() {
		<-l.stop
		_ = ps.Close() // ends a first Receive still waiting
	})
	subscribed := false
	// the first reply tells whether Redis took the subscription: one it
	// refuses for want of a permission (an ACL user without the channel)
	// is told to OnError, since the PubSub's own retries are silent
	switch m, err := ps.Receive(context.Background()); {
	case rediserr.NoPermission(err):
		if l.cfg.onError != nil {
			l.cfg.onError(fmt.Errorf("%w to SUBSCRIBE to channel %q, so pauses made through other processes do not reach this one until it reads them from Redis (grant it: ACL SETUSER <user> &%s): %w",
				ErrNoPermission, l.channel, l.channel, err))
		}
	case err == nil:
		if m, ok := m.(*redis.Subscription); ok && m.Kind == "subscribe" {
			l.recheck(false)
			subscribed = true
		}
	}
	ch := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-l.stop:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				l.applyPause(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					l.recheck(subscribed)
					subscribed = true
				}
			}
		}
	}
}

// recheck reads from Redis the pauses of the keys that waits of this
// process use, so that a pause published while the subscription was down
// still voids the turns it covers. Subscribed for the first time (New
// subscribes before any wait, unless Redis could not be reached then), it
// reads only the keys whose waits took turns without Redis: a turn from
// Redis comes with the pause in force. The reads go at once, up to
// rechecks at a time, sharing pipelined round trips (and script runs)
// through a client that can; a read that fails leaves its key as it was.
func (l *Limiter) recheck(again bool) {
	l.mu.Lock()
	var inUse []*keyState
	for _, ks := range l.keys {
		if ks.refs > 0 && (again || ks.degraded()) {
			ks.refs++ // held until read, as acquire does
			inUse = append(inUse, ks)
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	slots := make(chan struct{}, rechecks)
	for _, ks := range inUse {
		select {
		case <-l.stop: // closing: the rest are released unread
			l.release(ks)
			continue
		case slots <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-slots }()
			defer l.release(ks)
			l.recheckKey(ks)
		})
	}
	wg.Wait()
}

// rechecks is the most pause reads in flight at once after a new
// subscription.
const rechecks = 64

// recheckKey reads the pause of ks from Redis, within the Limiter's
// deadline.
func (l *Limiter) recheckKey(ks *keyState) {
	var (
		f   []int64
		err error
	)
	if l.batch != nil {
		args := append([]any{"evalsha", pausedSHA, 1, ks.key}, l.argv...)
		var v any
		v, err = l.call(context.Background(), callFunc(func(ctx context.Context) (any, error) {
			return l.batch.Do(ctx, pausedScriptSrc, args)
		}))
		if err == nil {
			f, _ = v.([]int64)
			err = checkInts("paused", f, 1)
		}
	} else {
		var v any
		if v, err = l.run(context.Background(), pausedScript, ks.key); err == nil {
			f, err = parseInts("paused", v, 1)
		}
	}
	recv := l.now()
	if err == nil && f[0] > 0 {
		ks.notePause(recv.Add(time.Duration(f[0]) * time.Microsecond))
	}
}

// applyPause applies one published pause, "<key> <µs left>", to this
// process's waiters of the key.
func (l *Limiter) applyPause(payload string) {
	i := strings.LastIndexByte(payload, ' ')
	if i < 0 {
		return
	}
	us, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || us <= 0 {
		return
	}
	if ks := l.lookup(payload[:i]); ks != nil {
		ks.notePause(l.now().Add(time.Duration(us) * time.Microsecond))
	}
}
