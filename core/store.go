package core

import (
	"context"
	"fmt"
	"time"
)

// Store decides limits against shared or local state. Implementations are
// safe for concurrent use. Being limited is a [Result], never an error; an
// error means the store could not decide (bad input, or the store failed).
type Store interface {
	// AllowN reports whether n units may be spent now under limit for key,
	// and spends them if so.
	AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error)
	// AllowAllN decides several limits at once, all or nothing: n units are
	// spent from every check's key only if every limit allows them. The
	// results follow the order of checks. When one limit denies, every
	// result has Allowed false, nothing is spent, and each result describes
	// its key as it stands (RetryAfter 0 for a limit that had room).
	//
	// In a Redis Cluster all keys must share one hash slot, as the keys
	// [Key] builds for one identity do.
	AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error)
}

// Check is one limit to decide on one storage key, for [Store.AllowAllN].
type Check struct {
	Key   string
	Limit Limit
}

// maxChecks bounds how many limits one call may decide.
const maxChecks = 64

// validate checks the arguments every store takes, before any work.
func validate(checks []Check, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d units (want at least 1)", ErrInvalidCost, n)
	}
	if len(checks) == 0 || len(checks) > maxChecks {
		return fmt.Errorf("%w: %d checks in one call (want 1 to %d)", ErrInvalidLimit, len(checks), maxChecks)
	}
	for i := range checks {
		if checks[i].Key == "" {
			return fmt.Errorf("%w: empty storage key", ErrInvalidIdentity)
		}
		if err := checks[i].Limit.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// result builds a Result from the four integers a decision yields, with
// durations in microseconds. Remaining below zero, which a key spent under
// a higher limit than limit reports, is zero.
func result(limit Limit, allowed bool, remaining, retryUS, resetUS int64) Result {
	remaining = max(remaining, 0)
	retry := time.Duration(retryUS) * time.Microsecond
	if retryUS < 0 {
		retry = -1
	}
	return Result{
		Limit:      limit,
		Allowed:    allowed,
		Remaining:  int(remaining),
		RetryAfter: retry,
		ResetAfter: time.Duration(resetUS) * time.Microsecond,
	}
}
