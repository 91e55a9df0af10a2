package outbound

import (
	"time"

	"github.com/ratekit/ratekit/core"
)

// Outcomes of a wait, as [WaitEvent.Outcome] names them.
const (
	// OutcomeGranted: the caller's turn came (or, for Allow, was now).
	OutcomeGranted = "granted"
	// OutcomeGaveUp: the turn would have come after the caller's deadline
	// (or, for Allow, later than now), so nothing was reserved.
	OutcomeGaveUp = "gave_up"
	// OutcomeCanceled: the caller's context ended while it waited.
	OutcomeCanceled = "canceled"
	// OutcomeError: no turn could be had: Redis refused the call, or could
	// not decide while this process knew no share of the rate.
	OutcomeError = "error"
)

// Reasons of a pause, as [Observer.Paused] names them.
const (
	// PauseRetryAfter: a 429 or 503 answer's Retry-After.
	PauseRetryAfter = "retry_after"
	// PauseQuota: RateLimit or X-RateLimit-* headers saying the quota is
	// spent until a reset.
	PauseQuota = "quota"
	// PauseDefault: a 429 without Retry-After, which pauses for
	// [DefaultPause].
	PauseDefault = "default"
	// PauseCaller: [Limiter.Pause] called by the application.
	PauseCaller = "caller"
)

// WaitEvent describes one wait for a turn, for an [Observer]. It never
// holds the key: metrics built from it stay bounded however many upstream
// accounts there are.
type WaitEvent struct {
	// Limiter is the Limiter's name.
	Limiter string
	// Wait is how long the caller waited, its reservations again after a
	// pause included; 0 for Allow.
	Wait time.Duration
	// Outcome is OutcomeGranted, OutcomeGaveUp, OutcomeCanceled or
	// OutcomeError.
	Outcome string
	// Degraded reports that the turn was decided without Redis, by this
	// process's share of the rate.
	Degraded bool
}

// Observer is told what a [Limiter] and its [Transport] do, for metrics;
// packages promlimit and otellimit have one each. Methods are called
// synchronously from many goroutines at once: they must be fast, must not
// block, and must be safe for concurrent use. limiter is always the
// Limiter's name, never a key.
type Observer interface {
	// Waited is called when a Wait, WaitN, Reserve, Allow or a Transport's
	// wait ends.
	Waited(e WaitEvent)
	// QueueChanged is called with the number of callers of the Limiter
	// asleep in this process waiting for their turn, after each change.
	QueueChanged(limiter string, depth int)
	// Throttled is called for each answer of the upstream that refused a
	// request: status is 429 or 503.
	Throttled(limiter string, status int)
	// Paused is called when this process pauses a key for the fleet, for
	// d, for reason (PauseRetryAfter, PauseQuota, PauseDefault or
	// PauseCaller).
	Paused(limiter string, d time.Duration, reason string)
	// RateChanged is called when this process sees the shared rate change,
	// with adaptation on ([WithAIMD]): the new rate, in units per second.
	RateChanged(limiter string, perSecond float64)
	// RedisCalled is called after every Redis call, with how long it took
	// and its error (nil on success).
	RedisCalled(limiter string, d time.Duration, err error)
	// BreakerChanged is called on every change of the circuit breaker's
	// state.
	BreakerChanged(limiter string, from, to core.BreakerState)
}
