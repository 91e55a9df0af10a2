package redisstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// PeekAll implements [core.QuotaStore.PeekAll] in one script call (peek.lua),
// which reads every key and writes nothing but a sliding log's trim.
func (s *Store) PeekAll(ctx context.Context, checks []core.Check) ([]core.Result, error) {
	return s.quota(ctx, peekScripts, checks, 1)
}

// RefundAllN implements [core.QuotaStore.RefundAllN] in one script call
// (refund.lua, then peek.lua). A GCRA key's TAT moves back by n intervals,
// never before now. A fixed window's live counter drops by n, deleted at
// 0, unless a check's ResetAfter says its units were spent in an earlier
// window than the one the counter's PTTL ends. A sliding counter's count
// drops by n, never below 0: that of the window a check's ResetAfter says
// the units were spent in, or without one, the current window's first
// and then the previous one's. A sliding log loses its n newest members,
// or with a ResetAfter the newest n of the instant nearest to when it
// says the units were admitted. A bound is taken as good within a quarter
// of the period, at least 2 ms ([core.Check]).
func (s *Store) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	var bounds []any
	if b := storecheck.RefundBounds(checks); b != "" {
		bounds = []any{b}
	}
	return s.quota(ctx, refundScripts, checks, n, bounds...)
}

// quota runs the peek or refund script of set on checks, with extra after
// the script's own arguments.
func (s *Store) quota(ctx context.Context, set *scriptSet, checks []core.Check, n int, extra ...any) ([]core.Result, error) {
	if err := storecheck.Validate(checks, n); err != nil {
		return nil, err
	}
	reply, err := s.quotaReply(ctx, set, checks, n, extra...)
	if err != nil {
		return nil, err
	}
	return parseQuotaReply(reply, checks)
}

// quotaReply runs set's script on checks at n, with extra after the
// script's own arguments, and returns its reply.
func (s *Store) quotaReply(ctx context.Context, set *scriptSet, checks []core.Check, n int, extra ...any) (string, error) {
	var (
		reply string
		err   error
	)
	if storecheck.HasOverride(checks) {
		reply, err = s.runOverride(ctx, s.quotas, overrideSets[set].of(checks), checks, n, extra...)
	} else {
		_, reply, err = s.runMany(ctx, s.quotas, set.of(checks), checks, n, extra...)
	}
	if err != nil {
		s.reloadSlots(err)
		return "", fmt.Errorf("ratekit: redis: %w", err)
	}
	return reply, nil
}

// parseQuotaReply reads the reply of a peek, refund or charge script
// (after the charge's own head) into one result per check.
func parseQuotaReply(reply string, checks []core.Check) ([]core.Result, error) {
	parse := parseReply
	if storecheck.HasOverride(checks) {
		parse = parseOverrideReply
	}
	results := make([]core.Result, len(checks))
	if err := parse(reply, checks, results); err != nil {
		return nil, err
	}
	return results, nil
}

// resetSource deletes KEYS[1] and publishes it on the channel ARGV[1], in
// one step: no process hears of a reset that did not happen.
const resetSource = "redis.call('DEL', KEYS[1]) return redis.call('PUBLISH', ARGV[1], KEYS[1])"

// Reset implements [core.QuotaStore.Reset]: for each key, one script call that
// deletes it and publishes it on [ResetChannel], pipelined in one round
// trip when the client has a Pipeline method. Keys may lie in different
// hash slots of a Cluster: each call goes to its key's master, and Redis
// carries the message to every node.
func (s *Store) Reset(ctx context.Context, keys ...string) error {
	if err := storecheck.ValidateKeys(keys); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	err := s.bounded(ctx, func(ctx context.Context) (err error) {
		if p, ok := s.client.(pipeliner); ok {
			_, err = p.Pipeline().Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for _, k := range keys {
					pipe.Eval(ctx, resetSource, []string{k}, ResetChannel)
				}
				return nil
			})
			return err
		}
		for _, k := range keys {
			if err = s.client.Eval(ctx, resetSource, []string{k}, ResetChannel).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: reset: %w", publishErr(err))
	}
	return nil
}

// subscriber is what reset watching needs of a client: *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient have it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// WatchResets implements [core.QuotaStore]. The store keeps one subscription
// to [ResetChannel] for all its watchers, made by the first and closed by
// the last stop or by [Store.Close], read by a goroutine of its own
// that calls each watcher's fn per message; go-redis reconnects the
// subscription by itself after a failure. The subscription is made in the
// background, so that watching does no I/O (a [core.Limiter] watches in
// NewLimiter): a reset published before it is first in place may be
// missed. Resets published while it is down go unheard too: each time
// Redis confirms it after a reconnect, every watcher's fn is called with
// the empty key, which tells it to forget what it remembers of every key
// (see [core.QuotaStore]). The last stop, and Close, wait for
// a subscription being dialed at most the client's DialTimeout. fn must not call stop. Over a
// client without a Subscribe method it returns an error wrapping
// [core.ErrNotSupported].
func (s *Store) WatchResets(fn func(key string)) (stop func(), err error) {
	sub, ok := s.client.(subscriber)
	if !ok {
		return nil, fmt.Errorf("%w: watching resets needs a client with a Subscribe method, not %T", core.ErrNotSupported, s.client)
	}
	if fn == nil {
		return nil, fmt.Errorf("ratekit: WatchResets: nil func")
	}
	return s.resets.watch(sub, fn, nil)
}

// WatchResetsReporting is [Store.WatchResets] that also calls report, once,
// when Redis refuses the subscription for want of a permission, with an
// error wrapping [ErrNoPermission] that names it: an ACL user without the
// channel [ResetChannel]. It implements [core.ResetWatchReporter], so a
// [core.Limiter] tells [core.OnError] and its logger. The subscription
// keeps being tried, and resets reach this process once it is allowed.
func (s *Store) WatchResetsReporting(fn func(key string), report func(error)) (stop func(), err error) {
	sub, ok := s.client.(subscriber)
	if !ok {
		return nil, fmt.Errorf("%w: watching resets needs a client with a Subscribe method, not %T", core.ErrNotSupported, s.client)
	}
	if fn == nil {
		return nil, fmt.Errorf("ratekit: WatchResets: nil func")
	}
	return s.resets.watch(sub, fn, report)
}

// resetHub fans one subscription to ResetChannel out to a store's
// watchers.
type resetHub struct {
	mu       sync.Mutex
	closed   bool
	refused  error // why Redis refused the subscription, for want of a permission
	watchers map[int]func(string)
	reports  map[int]func(error) // of the watchers that want to hear why watching fails
	next     int
	ps       *redis.PubSub // nil while nobody watches, and while subscribing
	cancel   func()        // ends the subscribing
	done     chan struct{} // nil while nobody watches; closed when the goroutine returns
	deliver  sync.Mutex    // held while watchers are called
}

func (h *resetHub) watch(sub subscriber, fn func(string), report func(error)) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, core.ErrClosed
	}
	if h.watchers == nil {
		h.watchers = make(map[int]func(string))
	}
	id := h.next
	h.next++
	h.watchers[id] = fn
	if report != nil {
		if h.reports == nil {
			h.reports = make(map[int]func(error))
		}
		h.reports[id] = report
		if h.refused != nil { // told the watchers before this one
			go report(h.refused)
		}
	}
	if h.done == nil {
		// subscribing does I/O, which the goroutine does
		var ctx context.Context
		ctx, h.cancel = context.WithCancel(context.Background())
		h.done = make(chan struct{})
		go h.run(ctx, sub, h.done)
	}
	var once sync.Once
	return func() { once.Do(func() { h.unwatch(id) }) }, nil
}

// run subscribes to ResetChannel, then calls the watchers with each
// message until the subscription is closed, or ctx ends first. A
// subscription that fails (Redis down) is made again by the PubSub's
// reconnects, since it remembers its channels.
func (h *resetHub) run(ctx context.Context, sub subscriber, done chan struct{}) {
	defer close(done)
	defer func() {
		// a client's hook that panics ends the watch, not the process:
		// store calls turn such panics into errors too
		_ = recover()
	}()
	ps := sub.Subscribe(ctx, ResetChannel)
	h.mu.Lock()
	if ctx.Err() != nil { // stopped while subscribing
		h.mu.Unlock()
		_ = ps.Close()
		return
	}
	h.ps = ps
	h.mu.Unlock()
	var fns []func(string)
	subscribed := false
	// the first reply tells whether Redis took the subscription: one it
	// refuses for want of a permission (an ACL user without the channel)
	// is told to the watchers that want to hear, since the PubSub's own
	// retries are silent
	switch m, err := ps.Receive(ctx); {
	case noPermission(err):
		h.refuse(subscribeErr(err))
	case err == nil:
		if m, ok := m.(*redis.Subscription); ok && m.Kind == "subscribe" {
			subscribed = true
		}
	}
	for msg := range ps.ChannelWithSubscriptions() {
		var key string
		switch m := msg.(type) {
		case *redis.Message:
			key = m.Payload
		case *redis.Subscription:
			// subscribed again after a lost connection: resets published
			// meanwhile went unheard (the first subscription is not
			// told: a watcher remembers little that soon, and emptying
			// its memory at a moment nobody chose would cost a store
			// call of each identity it denied since it started)
			if m.Kind != "subscribe" || !subscribed {
				subscribed = subscribed || m.Kind == "subscribe"
				continue
			}
		default:
			continue
		}
		fns = h.tell(key, fns[:0])
	}
}

// tell gives key to every watcher, one delivery at a time, calling them
// outside h.mu from a copy made in fns, which it returns for reuse.
func (h *resetHub) tell(key string, fns []func(string)) []func(string) {
	h.deliver.Lock()
	defer h.deliver.Unlock()
	h.mu.Lock()
	for _, fn := range h.watchers {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(key)
	}
	return fns
}

// refuse tells the watchers that want to hear why the subscription was
// refused, and those that come later.
func (h *resetHub) refuse(err error) {
	h.mu.Lock()
	h.refused = err
	reports := make([]func(error), 0, len(h.reports))
	for _, r := range h.reports {
		reports = append(reports, r)
	}
	h.mu.Unlock()
	for _, r := range reports {
		r(err)
	}
}

// unwatch removes watcher id and waits for calls of it in progress; the
// last one ends the subscription and waits for its goroutine.
func (h *resetHub) unwatch(id int) {
	h.mu.Lock()
	delete(h.watchers, id)
	delete(h.reports, id)
	if len(h.watchers) > 0 || h.done == nil {
		h.mu.Unlock()
		h.deliver.Lock() // wait for a delivery in progress
		//lint:ignore SA2001 the lock is taken only to wait for a delivery in progress
		h.deliver.Unlock()
		return
	}
	h.stop()
}

// stop ends the subscription, with h.mu held, which it unlocks, and waits
// for its goroutine: a goroutine still subscribing sees its context end,
// and closes what it made.
func (h *resetHub) stop() {
	ps, done := h.ps, h.done
	h.ps, h.done = nil, nil
	h.cancel()
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	<-done
}

// close ends watching for good: later watches fail with ErrClosed.
func (h *resetHub) close() {
	h.mu.Lock()
	h.closed = true
	clear(h.watchers)
	clear(h.reports)
	if h.done == nil {
		h.mu.Unlock()
		return
	}
	h.stop()
}
