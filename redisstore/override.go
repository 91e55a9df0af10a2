package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// allowOverride decides checks, one of which names an override key, into
// results, in one call of the generic decide script's override variant:
// the compiled one-key scripts have their limit built in, and batching
// merges calls of one limit, so override checks go around both.
func (s *Store) allowOverride(ctx context.Context, checks []core.Check, n int, results []core.Result) error {
	reply, err := s.runOverride(ctx, s.batch, overrideDecideScripts.of(checks), checks, n)
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: %w", err)
	}
	if s.cluster != nil && !s.routed.Load() {
		s.routed.Store(true)
	}
	return parseOverrideReply(reply, checks, results)
}

// runOverride runs sc, an override variant of a generic script (see
// scripts/override.lua), on checks at cost n: the storage keys, then the
// override keys; the cost, each limit's arguments, then each check's
// position of its override key in the keys; then extra, if any (a
// refund's bounds). It goes through b, as runMany does.
func (s *Store) runOverride(ctx context.Context, b *batcher, sc *script, checks []core.Check, n int, extra ...any) (string, error) {
	keys := make([]string, len(checks), 2*len(checks))
	pos := make([]any, len(checks))
	for i := range checks {
		keys[i] = checks[i].Key
	}
	for i := range checks {
		pos[i] = 0
		if o := checks[i].Override; o != "" {
			keys = append(keys, o)
			pos[i] = len(keys)
		}
	}
	var args []any
	if s.proc != nil || b != nil {
		args = make([]any, 3, 4+len(keys)+5*len(checks))
		args[2] = len(keys)
		for _, k := range keys {
			args = append(args, k)
		}
	}
	args = append(args, n)
	for i := range checks {
		args = append(args, s.scripts(checks[i].Limit).args[:]...)
	}
	args = append(args, pos...)
	args = append(args, extra...)
	var (
		reply string
		err   error
	)
	switch {
	case b != nil:
		c := b.call()
		c.sc, c.args = sc, args
		args[0], args[1] = "evalsha", sc.sha
		_, reply, err = b.do(ctx, c)
	case s.proc != nil:
		_, reply, err = s.eval(ctx, sc, args)
	default:
		_, reply, err = sc.split(sc.Run(ctx, s.client, keys, args...).Result())
	}
	return reply, err
}

// setOverrideScript writes an override and tells reset watchers of its
// storage key, in one step.
//
// KEYS[1]: the override key. ARGV[1]: the value, "<rate> <period ms>
// <burst>"; ARGV[2]: the TTL in ms, 0 for none; ARGV[3]: the channel;
// ARGV[4]: the storage key. Reply: PUBLISH's.
var setOverrideScript = redis.NewScript(`
if ARGV[2] == '0' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return redis.call('PUBLISH', ARGV[3], ARGV[4])`)

// clearOverrideScript deletes an override and tells reset watchers of its
// storage key. KEYS[1]: the override key. ARGV[1]: the channel; ARGV[2]:
// the storage key.
var clearOverrideScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
return redis.call('PUBLISH', ARGV[1], ARGV[2])`)

// SetOverride implements [core.QuotaStore.SetOverride] in one script call,
// which sets the override key (a string "<rate> <period ms> <burst>",
// with a TTL rounded up to the millisecond) and publishes key on
// [ResetChannel].
func (s *Store) SetOverride(ctx context.Context, key, override string, limit core.Limit, ttl time.Duration) error {
	if err := storecheck.ValidateOverride(key, override, limit, ttl); err != nil {
		return err
	}
	value := strconv.Itoa(limit.Rate) + " " + strconv.FormatInt(limit.Period.Milliseconds(), 10) + " " + strconv.Itoa(limit.Burst)
	err := s.bounded(ctx, func(ctx context.Context) error {
		return setOverrideScript.Run(ctx, s.client, []string{override}, value, storecheck.OverrideTTL(ttl), ResetChannel, key).Err()
	})
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: set override: %w", publishErr(err))
	}
	return nil
}

// ClearOverride implements [core.QuotaStore.ClearOverride] in one script
// call, which deletes the override key and publishes key on
// [ResetChannel].
func (s *Store) ClearOverride(ctx context.Context, key, override string) error {
	if err := storecheck.ValidateOverrideKeys(key, override); err != nil {
		return err
	}
	err := s.bounded(ctx, func(ctx context.Context) error {
		return clearOverrideScript.Run(ctx, s.client, []string{override}, ResetChannel, key).Err()
	})
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: clear override: %w", publishErr(err))
	}
	return nil
}
