package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

// ErrNotUp is the error of a Redis that did not answer within
// REDIS_STARTUP_MAX_ELAPSED_TIME at start.
var ErrNotUp = errors.New("redis did not answer at start")

// AwaitUp asks Redis for PONG until it answers, as envoy's service does
// before it serves: after a failed attempt it waits REDIS_STARTUP's
// initial interval, then twice as long each time up to its maximum, each
// wait drawn at random between the initial interval and that bound. It
// logs each failed attempt, and returns an error wrapping ErrNotUp once
// the maximum elapsed time has passed (never when it is 0), or ctx's
// error when ctx ends first. Each attempt is bounded by REDIS_TIMEOUT.
func (s *Stores) AwaitUp(ctx context.Context, set settings.Settings, log *slog.Logger) error {
	ping := func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, set.RedisTimeout)
		defer cancel()
		pong, err := s.Client.Ping(pctx).Result()
		if err == nil && pong != "PONG" {
			err = fmt.Errorf("PING answered %q", pong)
		}
		return err
	}
	return awaitUp(ctx, set.RedisStartup, set.RedisURL, ping, log)
}

// awaitUp calls ping until it succeeds, as AwaitUp says.
func awaitUp(ctx context.Context, st settings.Startup, addr string, ping func(context.Context) error, log *slog.Logger) error {
	start := time.Now()
	bound := st.Initial
	for {
		err := ping(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for Redis at %s: %w", addr, ctx.Err())
		}
		elapsed := time.Since(start)
		if st.MaxElapsed > 0 && elapsed >= st.MaxElapsed {
			return fmt.Errorf("%w: %s not up after %v (REDIS_STARTUP_MAX_ELAPSED_TIME=%v): %v",
				ErrNotUp, addr, elapsed.Round(time.Millisecond), st.MaxElapsed, err)
		}
		wait := st.Initial
		if bound > st.Initial {
			wait += rand.N(bound - st.Initial)
		}
		bound = min(2*bound, st.Max)
		log.Warn("Redis does not answer at start; asking again", "addr", addr, "in", wait, "elapsed", elapsed.Round(time.Millisecond), "error", err.Error())
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for Redis at %s: %w", addr, ctx.Err())
		}
	}
}
