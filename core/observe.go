package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"
)

// Observer is told what a [Limiter] decides and how its store fares, for
// metrics; package promlimit has one for Prometheus. Register one with
// [WithObserver].
//
// Methods are called synchronously on the goroutine that caused the event,
// from many goroutines at once: they must be fast, must not block, and
// must be safe for concurrent use.
type Observer interface {
	// Decided is called once for each rule result of every decision
	// [Limiter.Check] returns, after the decision is made. ctx is the
	// Check's context.
	Decided(ctx context.Context, e DecisionEvent)
	// StoreCalled is called after every call the Limiter made to its
	// store, the circuit breaker's probes included, with how long it took
	// and its error (nil on success). A call abandoned at its deadline
	// reports the deadline and an error wrapping
	// [context.DeadlineExceeded]. Requests decided without a store call (a
	// denied-key cache hit, an open breaker) report none.
	StoreCalled(d time.Duration, err error)
	// BreakerChanged is called on every change of the circuit breaker's
	// state, one call at a time and in order; it must not call the
	// Limiter's Check.
	BreakerChanged(from, to BreakerState)
}

// DecisionEvent describes one rule's part of a decision, for an
// [Observer]. It never holds the identity: metrics built from it stay
// bounded however many clients there are.
type DecisionEvent struct {
	// Rule is the rule's name.
	Rule string
	// Result is the rule's result, as in [Decision.Results]. For a rule in
	// shadow mode, Allowed is what the rule would have decided.
	Result
	// Shadow reports that the rule was in shadow mode ([Rule.Shadow],
	// [WithShadow]): its denial, if any, denied nothing.
	Shadow bool
	// Cached reports that the denied-key cache answered for the rule,
	// without a store call ([WithDeniedCache]).
	Cached bool
}

// verdict names what the rule of e decided, for the debug log: allowed,
// denied, or shadow_denied for a shadow rule that would have denied.
func verdict(e DecisionEvent) string {
	switch {
	case e.Allowed:
		return "allowed"
	case e.Shadow:
		return "shadow_denied"
	}
	return "denied"
}

// observers calls each of several observers.
type observers []Observer

func (m observers) Decided(ctx context.Context, e DecisionEvent) {
	for _, o := range m {
		o.Decided(ctx, e)
	}
}

func (m observers) StoreCalled(d time.Duration, err error) {
	for _, o := range m {
		o.StoreCalled(d, err)
	}
}

func (m observers) BreakerChanged(from, to BreakerState) {
	for _, o := range m {
		o.BreakerChanged(from, to)
	}
}

// observe tells the observer, the debug log and the denial log
// ([WithDenialLog]) about a decision.
// rules holds the planned rule of each of d's results.
func (l *Limiter) observe(ctx context.Context, d *Decision, rules []planned) {
	if l.idObserver != nil && l.logger == nil {
		// one observer that takes identities, such as the live page's,
		// and no log: the event goes straight to it, built in place
		for i := range d.Results {
			r, p := &d.Results[i], &rules[i]
			l.idObserver.DecidedIdentity(ctx, DecisionEvent{Rule: r.Rule, Result: r.Result, Shadow: r.Shadow, Cached: p.cached}, p.identity)
		}
		return
	}
	debug := l.logger != nil && l.logger.Enabled(ctx, slog.LevelDebug)
	denials := l.denialLog != nil && l.logger != nil
	if l.observer == nil && !debug && !denials {
		return
	}
	for i := range d.Results {
		r := &d.Results[i]
		p := &rules[i]
		e := DecisionEvent{Rule: r.Rule, Result: r.Result, Shadow: r.Shadow, Cached: p.cached}
		if l.observer != nil {
			tell(ctx, l.observer, e, p.identity)
		}
		if denials && !r.Allowed {
			l.logDenial(ctx, &e, p)
		}
		if debug {
			l.logger.LogAttrs(ctx, slog.LevelDebug, "ratekit: decision",
				slog.String("rule", r.Rule),
				slog.Any("identity", redacted(p.identity)),
				slog.String("verdict", verdict(e)),
				slog.Int("cost", p.cost),
				slog.Int("limit", r.Limit.Capacity()),
				slog.Int("remaining", r.Remaining),
				slog.Duration("retry_after", r.RetryAfter),
				slog.Duration("reset_after", r.ResetAfter),
				slog.Bool("degraded", r.Degraded),
				slog.Bool("cached", e.Cached))
		}
	}
}

// redacted wraps an identity for logging: its [slog.LogValuer] writes the
// identity's kind (the part before the first ':', such as "ip" or "user")
// and a short keyed hash of the rest, never the identity itself. The key
// is drawn at random when the process starts, so equal identities log
// alike within one process, and the hash cannot be reversed by hashing
// guesses (every IPv4 address, say) without the key.
type redacted string

// LogValue returns the redacted form, such as "ip:5f0c3a1d9be2".
func (r redacted) LogValue() slog.Value {
	return slog.StringValue(redact(string(r)))
}

// String returns the redacted form, as LogValue does.
func (r redacted) String() string { return redact(string(r)) }

var redactKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}()

func redact(id string) string {
	kind, rest, ok := strings.Cut(id, ":")
	if !ok || len(kind) > 16 || !printableWord(kind) {
		kind, rest = "", id
	}
	m := hmac.New(sha256.New, redactKey)
	m.Write([]byte(rest))
	sum := m.Sum(nil)
	var b strings.Builder
	b.Grow(len(kind) + 13)
	if kind != "" {
		b.WriteString(kind)
		b.WriteByte(':')
	}
	b.WriteString(hex.EncodeToString(sum[:6]))
	return b.String()
}

// printableWord reports whether s is a short word of letters, digits, '-'
// and '_', as identity kinds are.
func printableWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
