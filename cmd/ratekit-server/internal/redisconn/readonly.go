package redisconn

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// OnReadOnly calls f for every READONLY reply of Redis, the answer of a
// master demoted to a replica, to a command or a pipeline's. go-redis
// closes the connection that got it, so that the next dial reaches the
// address's new master (a Service or DNS name moved to it): envoy's
// REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR=true, whatever it says. Call it
// before the stores are used.
func (s *Stores) OnReadOnly(f func()) {
	s.Client.AddHook(readOnlyHook{f})
}

type readOnlyHook struct{ f func() }

func (readOnlyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h readOnlyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && redis.HasErrorPrefix(err, "READONLY") {
			h.f()
		}
		return err
	}
}

func (h readOnlyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "READONLY") {
				h.f()
			}
		}
		return err
	}
}
