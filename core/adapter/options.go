package adapter

import (
	"errors"
	"fmt"

	"github.com/ratekit/ratekit/core"
)

// Settings is what the options of one adapter configure: the
// framework-neutral [Config] that every adapter shares, and H, the hooks of
// the adapter's own framework (a skip function, a denied handler, an error
// handler, written in the framework's types).
type Settings[H any] struct {
	Config
	Hooks H
}

// Option configures the middleware of an adapter whose hooks are H. An
// adapter declares its own option type as an alias of Option over an
// unexported hooks type, which seals it: only the adapter's package can
// name the type argument, so only it makes options.
//
//	type hooks struct{ skip func(*http.Request) bool }
//	type Option = adapter.Option[hooks]
//
//	func WithHeaders(style adapter.HeaderStyle) Option { return adapter.WithHeaders[hooks](style) }
type Option[H any] func(*Settings[H]) error

// Apply applies opts in order and returns the settings. It returns an
// error, prefixed with fn (the adapter's constructor, such as
// "ginlimit.New"), for a nil option and for any option's error. The Config
// is validated by [New].
func Apply[H any](fn string, opts []Option[H]) (Settings[H], error) {
	var s Settings[H]
	for _, o := range opts {
		if o == nil {
			return s, fmt.Errorf("%s: nil option", fn)
		}
		if err := o(&s); err != nil {
			return s, fmt.Errorf("%s: %w", fn, err)
		}
	}
	return s, nil
}

// ErrNilFunc is returned by an option given a nil function.
var ErrNilFunc = errors.New("nil function in option")

// WithHeaders selects the rate-limit header fields that responses carry;
// [HeadersBoth] by default. See [NewHeaders] for their values.
func WithHeaders[H any](style HeaderStyle) Option[H] {
	return func(s *Settings[H]) error { s.Headers = style; return nil }
}

// WithIETFDraft selects the syntax of the IETF RateLimit-Policy and
// RateLimit fields; [DefaultIETFDraft] by default.
func WithIETFDraft[H any](draft IETFDraft) Option[H] {
	return func(s *Settings[H]) error { s.Draft = draft; return nil }
}

// WithFailClosedStatus sets the status of the answer when the store is
// unavailable and the Limiter fails closed; 503 by default.
func WithFailClosedStatus[H any](status int) Option[H] {
	return func(s *Settings[H]) error { s.FailClosedStatus = status; return nil }
}

// WithNoIdentity says what to do when a rule's key function finds no
// identity: skip that rule ([NoIdentityNext], the default) or answer 401
// ([NoIdentity401]).
func WithNoIdentity[H any](policy NoIdentityPolicy) Option[H] {
	return func(s *Settings[H]) error { s.NoIdentity = policy; return nil }
}

// ErrOptionMismatch is returned by a constructor given an option meant for
// another middleware of the same package, such as a rate limit's denied
// handler given to a concurrency limit's middleware, whose denials carry
// another result.
var ErrOptionMismatch = errors.New("option meant for another middleware")

// WithRuleSet makes the middleware read its rules from set at each
// request, instead of the rules given to New, which must be empty (nil):
// see [Config.Rules]. Use it to change limits without a restart.
func WithRuleSet[H any](set *core.RuleSet) Option[H] {
	return func(s *Settings[H]) error {
		if set == nil {
			return errors.New("WithRuleSet: nil RuleSet")
		}
		s.Rules = set
		return nil
	}
}

// WithCharged makes the named rules charge the cost of each answer once
// it is done, as its handler reports it ([Config.Charged], [Meter]).
func WithCharged[H any](rules ...string) Option[H] {
	return func(s *Settings[H]) error {
		s.Charged = append(s.Charged, rules...)
		return nil
	}
}

// WithCountOnly makes the named rule count only the answers whose status
// count reports true, such as a login's 401s: see [Config.CountOnly]. The
// rule's unit is reserved before the next handler runs and given back when
// the answer does not count, so that concurrent requests never overrun the
// limit; a request denied while others hold reservations that are given
// back later was denied all the same. The status counted is the first the
// answer sends, and an answer that does not count carries the header
// fields of the quota after the refund ([Config.CountOnly]). Given twice
// for one rule, the last wins.
func WithCountOnly[H any](rule string, count func(status int) bool) Option[H] {
	return func(s *Settings[H]) error {
		if count == nil {
			return fmt.Errorf("WithCountOnly(%q): %w", rule, ErrNilFunc)
		}
		if s.CountOnly == nil {
			s.CountOnly = make(map[string]func(int) bool)
		}
		s.CountOnly[rule] = count
		return nil
	}
}
