package core

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// PeekAll implements [QuotaStore.PeekAll] in one script call (peek.lua),
// which reads every key and writes nothing but a sliding log's trim.
func (s *RedisStore) PeekAll(ctx context.Context, checks []Check) ([]Result, error) {
	return s.quota(ctx, peekScripts, checks, 1)
}

// RefundAllN implements [QuotaStore.RefundAllN] in one script call
// (refund.lua, then peek.lua). A GCRA key's TAT moves back by n intervals,
// never before now; a fixed window's count, in its current window, and a
// sliding counter's, from its current window and then the previous one,
// drop by n, never below 0; a sliding log loses its n newest members.
func (s *RedisStore) RefundAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
	return s.quota(ctx, refundScripts, checks, n)
}

// quota runs the peek or refund script of set on checks.
func (s *RedisStore) quota(ctx context.Context, set *scriptSet, checks []Check, n int) ([]Result, error) {
	if err := validate(checks, n); err != nil {
		return nil, err
	}
	var (
		reply string
		err   error
	)
	parse := parseReply
	if hasOverride(checks) {
		reply, err = s.runOverride(ctx, overrideSets[set].of(checks), checks, n)
		parse = parseOverrideReply
	} else {
		_, reply, err = s.runMany(ctx, set.of(checks), checks, n)
	}
	if err != nil {
		s.reloadSlots(err)
		return nil, fmt.Errorf("ratekit: redis: %w", err)
	}
	results := make([]Result, len(checks))
	if err := parse(reply, checks, results); err != nil {
		return nil, err
	}
	return results, nil
}

// resetSource deletes KEYS[1] and publishes it on the channel ARGV[1], in
// one step: no process hears of a reset that did not happen.
const resetSource = "redis.call('DEL', KEYS[1]) return redis.call('PUBLISH', ARGV[1], KEYS[1])"

// Reset implements [QuotaStore.Reset]: for each key, one script call that
// deletes it and publishes it on [ResetChannel], pipelined in one round
// trip when the client has a Pipeline method. Keys may lie in different
// hash slots of a Cluster: each call goes to its key's master, and Redis
// carries the message to every node.
func (s *RedisStore) Reset(ctx context.Context, keys ...string) error {
	if err := validateKeys(keys); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	var err error
	if p, ok := s.client.(pipeliner); ok {
		_, err = p.Pipeline().Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, k := range keys {
				pipe.Eval(ctx, resetSource, []string{k}, ResetChannel)
			}
			return nil
		})
	} else {
		for _, k := range keys {
			if err = s.client.Eval(ctx, resetSource, []string{k}, ResetChannel).Err(); err != nil {
				break
			}
		}
	}
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: reset: %w", err)
	}
	return nil
}

// subscriber is what reset watching needs of a client: *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient have it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// WatchResets implements [ResetWatcher]. The store keeps one subscription
// to [ResetChannel] for all its watchers, made by the first and closed by
// the last stop or by [RedisStore.Close], read by a goroutine of its own
// that calls each watcher's fn per message; go-redis reconnects the
// subscription by itself after a failure (resets published meanwhile are
// missed). The subscription is made in the background, so that watching
// does no I/O (a [Limiter] watches in NewLimiter): a reset published
// before it is in place may be missed. The last stop, and Close, wait for
// a subscription being dialed at most the client's DialTimeout. fn must not call stop. Over a
// client without a Subscribe method it returns an error wrapping
// [ErrNotSupported].
func (s *RedisStore) WatchResets(fn func(key string)) (stop func(), err error) {
	sub, ok := s.client.(subscriber)
	if !ok {
		return nil, fmt.Errorf("%w: watching resets needs a client with a Subscribe method, not %T", ErrNotSupported, s.client)
	}
	if fn == nil {
		return nil, fmt.Errorf("ratekit: WatchResets: nil func")
	}
	return s.resets.watch(sub, fn)
}

// resetHub fans one subscription to ResetChannel out to a store's
// watchers.
type resetHub struct {
	mu       sync.Mutex
	closed   bool
	watchers map[int]func(string)
	next     int
	ps       *redis.PubSub // nil while nobody watches
	cancel   func()        // ends the subscribing of ps
	done     chan struct{} // closed when the goroutine reading ps returns
	deliver  sync.Mutex    // held while watchers are called
}

func (h *resetHub) watch(sub subscriber, fn func(string)) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.watchers == nil {
		h.watchers = make(map[int]func(string))
	}
	id := h.next
	h.next++
	h.watchers[id] = fn
	if h.ps == nil {
		// no channel yet: subscribing does I/O, which the goroutine does
		h.ps = sub.Subscribe(context.Background())
		var ctx context.Context
		ctx, h.cancel = context.WithCancel(context.Background())
		h.done = make(chan struct{})
		go h.run(ctx, h.ps, h.done)
	}
	var once sync.Once
	return func() { once.Do(func() { h.unwatch(id) }) }, nil
}

// run subscribes ps to ResetChannel, then calls the watchers with each
// message of ps until ps is closed. A subscription that fails (Redis down)
// is made again by ps's reconnects, since ps remembers its channels.
func (h *resetHub) run(ctx context.Context, ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	_ = ps.Subscribe(ctx, ResetChannel)
	var fns []func(string)
	for msg := range ps.Channel() {
		h.deliver.Lock()
		h.mu.Lock()
		fns = fns[:0]
		for _, fn := range h.watchers {
			fns = append(fns, fn)
		}
		h.mu.Unlock()
		for _, fn := range fns {
			fn(msg.Payload)
		}
		h.deliver.Unlock()
	}
}

// unwatch removes watcher id and waits for calls of it in progress; the
// last one closes the subscription and waits for its goroutine.
func (h *resetHub) unwatch(id int) {
	h.mu.Lock()
	delete(h.watchers, id)
	var ps *redis.PubSub
	var done chan struct{}
	if len(h.watchers) == 0 && h.ps != nil {
		ps, done, h.ps = h.ps, h.done, nil
		h.cancel()
	}
	h.mu.Unlock()
	h.stopRun(ps, done)
}

// stopRun closes ps, when not nil, and waits for its goroutine; otherwise
// it waits for a delivery in progress.
func (h *resetHub) stopRun(ps *redis.PubSub, done chan struct{}) {
	if ps == nil {
		h.deliver.Lock()
		//lint:ignore SA2001 the lock is taken only to wait for a delivery in progress
		h.deliver.Unlock()
		return
	}
	_ = ps.Close()
	<-done
}

// close ends watching for good: later watches fail with ErrClosed.
func (h *resetHub) close() {
	h.mu.Lock()
	h.closed = true
	clear(h.watchers)
	ps, done := h.ps, h.done
	if h.ps != nil {
		h.cancel()
	}
	h.ps = nil
	h.mu.Unlock()
	if ps != nil {
		h.stopRun(ps, done)
	}
}
