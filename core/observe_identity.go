package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// IdentityObserver is an [Observer] that is also told whose decision each
// result is: the identity the rule's key function made (such as
// "ip:203.0.113.7"). For an observer that has the method, a [Limiter] calls
// DecidedIdentity in place of Decided, under the same rules: synchronously,
// from many goroutines at once, fast and without blocking.
//
// Identities are personal data (client addresses, user ids): an
// IdentityObserver keeps what it must in bounded memory and shows them
// only as its application allows. Package livepage has one.
type IdentityObserver interface {
	Observer
	// DecidedIdentity is Decided with the identity of the result's rule.
	DecidedIdentity(ctx context.Context, e DecisionEvent, identity string)
}

// tell passes e to o, with its identity when o is an [IdentityObserver].
func tell(ctx context.Context, o Observer, e DecisionEvent, identity string) {
	switch o := o.(type) {
	case observers:
		for _, each := range o {
			tell(ctx, each, e, identity)
		}
	case IdentityObserver:
		o.DecidedIdentity(ctx, e, identity)
	default:
		o.Decided(ctx, e)
	}
}

// FailurePolicy returns the Limiter's failure policy ([WithFailurePolicy]),
// for status pages.
func (l *Limiter) FailurePolicy() FailurePolicy { return l.policy }

// DenialLog configures the log line of each denial ([WithDenialLog]).
type DenialLog struct {
	// PerSecond is how many denial lines go out per second at most; the
	// others are counted, and the next line that goes out says how many
	// were left out ("suppressed"). 0 means 10.
	PerSecond int
	// ShowIdentity logs identities as their key functions made them. By
	// default they are redacted: their kind and a keyed hash, as in the
	// debug log ([WithLogger]).
	ShowIdentity bool
}

// WithDenialLog makes a [Limiter] log each denial at Info on its logger
// ([WithLogger]), "ratekit: denied", with the rule that denied, the
// identity (redacted unless c.ShowIdentity), the cost, the limit, the wait
// until one request passes (retry_after) and until the quota is full again
// (reset_after), and whether the answer was degraded or came from the
// denied-key cache. A shadow rule's denial, which denies nothing, is
// logged as "ratekit: shadow denied". Under load the lines are sampled:
// at most c.PerSecond a second, each telling how many were suppressed
// since the last. Without a logger nothing is logged.
func WithDenialLog(c DenialLog) Option {
	return func(l *Limiter) error {
		if c.PerSecond < 0 {
			return fmt.Errorf("ratekit: WithDenialLog: PerSecond %d is negative", c.PerSecond)
		}
		if c.PerSecond == 0 {
			c.PerSecond = 10
		}
		if l.denialLog != nil {
			return errors.New("ratekit: WithDenialLog given twice")
		}
		l.denialLog = &denialLog{DenialLog: c}
		return nil
	}
}

// denialLog samples the denial lines: at most PerSecond in each second of
// the Limiter's mono time.
type denialLog struct {
	DenialLog
	window     atomic.Int64 // the second the count is of
	count      atomic.Int64 // lines that went out, or tried to, in window
	suppressed atomic.Int64
}

// take reports whether a line may go out at now (mono ns) and how many
// were suppressed since the last that did.
func (s *denialLog) take(now int64) (bool, int64) {
	sec := now / int64(time.Second)
	if w := s.window.Load(); w != sec && s.window.CompareAndSwap(w, sec) {
		s.count.Store(0)
	}
	if s.count.Add(1) > int64(s.PerSecond) {
		s.suppressed.Add(1)
		return false, 0
	}
	return true, s.suppressed.Swap(0)
}

// logDenial writes the denial line of one rule's result, when the sample
// lets it out.
func (l *Limiter) logDenial(ctx context.Context, e *DecisionEvent, p *planned) {
	ok, suppressed := l.denialLog.take(l.mono())
	if !ok {
		return
	}
	msg := "ratekit: denied"
	if e.Shadow {
		msg = "ratekit: shadow denied"
	}
	id := slog.Any("identity", redacted(p.identity))
	if l.denialLog.ShowIdentity {
		id = slog.String("identity", p.identity)
	}
	l.logger.LogAttrs(ctx, slog.LevelInfo, msg,
		slog.String("rule", e.Rule),
		id,
		slog.Int("cost", p.cost),
		slog.Int("limit", e.Limit.Capacity()),
		slog.Duration("retry_after", e.RetryAfter),
		slog.Duration("reset_after", e.ResetAfter),
		slog.Bool("degraded", e.Degraded),
		slog.Bool("cached", e.Cached),
		slog.Int64("suppressed", suppressed))
}
