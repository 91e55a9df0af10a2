package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultMinTimeLeft is the least time a [Transport] leaves a request for
// itself after its turn, unless MinTimeLeft says otherwise.
const DefaultMinTimeLeft = 50 * time.Millisecond

// DefaultMaxPause caps the pauses a [Transport] takes from an upstream's
// answers, unless MaxPause says otherwise.
const DefaultMaxPause = time.Hour

// DefaultMaxQuotaPause caps the pauses a [Transport] takes from the quota
// headers of an answer that was not a refusal, unless MaxQuotaPause says
// otherwise.
const DefaultMaxQuotaPause = time.Minute

// ErrNoKey is returned, wrapped, by a [Transport] whose key function
// found no key for a request.
var ErrNoKey = errors.New("ratekit: outbound: no key for the request")

// Transport is an [http.RoundTripper] that waits for its turn before each
// request, on the schedule its Limiter shares with every process, and
// honours what the upstream answers:
//
//   - A 429 pauses the request's key for the whole fleet until its
//     Retry-After (delay seconds or an HTTP date), or for [DefaultPause]
//     without one, and tells the Limiter of the refusal
//     ([Limiter.Refused]), which lowers the shared rate when adaptation is
//     on ([WithAIMD]).
//   - A 503 with Retry-After pauses the key until then.
//   - An answer whose RateLimit or X-RateLimit-* headers say no quota is
//     left pauses the key until the reset they name, for at most
//     MaxQuotaPause.
//
// A request goes only if its turn leaves it MinTimeLeft before its
// context's deadline; otherwise RoundTrip returns at once an error
// wrapping [ErrWouldExceedDeadline], having reserved nothing. A refused
// request is retried, up to Retries times, through the limiter again, so
// a retry waits for its turn and for the pause like any request.
//
// Its fields must not change once it is in use; a Transport is safe for
// concurrent use.
type Transport struct {
	// Limiter hands out the turns. Required.
	Limiter *Limiter
	// Key returns the key of a request: what the upstream limits, such as
	// its host and the account the request is made for. nil keys by the
	// request's URL host. An error fails the request, wrapped with
	// ErrNoKey.
	Key func(*http.Request) (string, error)
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// MinTimeLeft is the least time a request needs after its turn: a
	// turn later than the context's deadline less MinTimeLeft is not
	// taken. 0 means DefaultMinTimeLeft (50 ms); negative, none.
	MinTimeLeft time.Duration
	// Retries is how many times a request refused with 429, or 503 with
	// Retry-After, is sent again, each time after its turn; 0 (the
	// default) returns the refusal. Only requests whose body can be read
	// again (none, or GetBody set) are retried. When no turn fits the
	// deadline, the last refusal is returned.
	Retries int
	// MaxPause caps the pauses taken from the upstream's answers (a
	// Retry-After of a year is either a mistake or a ban): 0 means
	// DefaultMaxPause (1 hour).
	MaxPause time.Duration
	// MaxQuotaPause caps the pauses taken from the RateLimit and
	// X-RateLimit-* headers of an answer that was not a refusal: 0 means
	// DefaultMaxQuotaPause (1 minute), and MaxPause caps it too. Such an
	// answer is a report, not a refusal, and one of them (a reset a year
	// on, by mistake or by design) pauses the key for every process: past
	// this cap, the next request asks the upstream again.
	MaxQuotaPause time.Duration
	// IgnoreQuotaHeaders turns off the pauses that RateLimit and
	// X-RateLimit-* headers ask for, keeping those of 429 and 503. An
	// upstream that reports no quota left after every request at its
	// limit, with a reset rounded up to a whole second (a sliding window
	// in full use), would otherwise pause the key that second each time.
	IgnoreQuotaHeaders bool
}

// RoundTrip waits for the request's turn, sends it with Base, and pauses
// the key when the answer asks for it (see [Transport]).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := t.key(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if err := t.wait(req.Context(), key); err != nil {
		closeBody(req)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		out := req
		if attempt > 0 {
			if out, err = rewind(req); err != nil {
				return nil, err
			}
		}
		resp, err := t.base().RoundTrip(out)
		if err != nil {
			return nil, err
		}
		refused := t.observe(req.Context(), key, resp)
		if !refused || attempt >= t.Retries || !replayable(req) {
			return resp, nil
		}
		if t.wait(req.Context(), key) != nil {
			return resp, nil // no turn fits: the refusal is the answer
		}
		drain(resp)
	}
}

// key returns the request's key.
func (t *Transport) key(req *http.Request) (string, error) {
	if t.Limiter == nil {
		return "", errors.New("ratekit: outbound: Transport without a Limiter")
	}
	if t.Key == nil {
		if req.URL == nil || req.URL.Host == "" {
			return "", fmt.Errorf("%w: the request has no URL host", ErrNoKey)
		}
		return req.URL.Host, nil
	}
	k, err := t.Key(req)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	if k == "" {
		return "", fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
	}
	return k, nil
}

// wait waits for a turn of key that leaves the request its MinTimeLeft.
func (t *Transport) wait(ctx context.Context, key string) error {
	actBy, ok := ctx.Deadline()
	if ok {
		left := t.MinTimeLeft
		if left == 0 {
			left = DefaultMinTimeLeft
		}
		actBy = actBy.Add(-max(left, 0))
	}
	if err := t.Limiter.waitUntil(ctx, key, 1, actBy); err != nil {
		return err
	}
	return ctx.Err()
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// observe pauses key if resp asks for it, and reports whether resp is a
// refusal worth retrying (429, or 503 with Retry-After).
func (t *Transport) observe(ctx context.Context, key string, resp *http.Response) bool {
	l := t.Limiter
	now := l.now()
	ra, hasRA := retryAfter(resp.Header, now)
	ctx = context.WithoutCancel(ctx) // a pause matters after the request
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		l.throttled(resp.StatusCode)
		reason := PauseRetryAfter
		if !hasRA || ra <= 0 {
			ra, reason = DefaultPause, PauseDefault
		}
		_ = l.pause(ctx, key, t.capPause(ra), true, reason)
		return true
	case resp.StatusCode == http.StatusServiceUnavailable && hasRA:
		l.throttled(resp.StatusCode)
		if ra > 0 {
			_ = l.pause(ctx, key, t.capPause(ra), false, PauseRetryAfter)
		}
		return true
	case !t.IgnoreQuotaHeaders:
		if d, spent := quotaSpent(resp.Header, now); spent && d > 0 {
			_ = l.pause(ctx, key, min(t.capPause(d), t.maxQuotaPause()), false, PauseQuota)
		}
	}
	return false
}

func (t *Transport) capPause(d time.Duration) time.Duration {
	m := t.MaxPause
	if m <= 0 {
		m = DefaultMaxPause
	}
	return min(d, m)
}

func (t *Transport) maxQuotaPause() time.Duration {
	if t.MaxQuotaPause <= 0 {
		return DefaultMaxQuotaPause
	}
	return t.MaxQuotaPause
}

// throttled tells the observers of a refusal.
func (l *Limiter) throttled(status int) {
	for _, o := range l.cfg.observers {
		o.Throttled(l.name, status)
	}
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind returns a copy of req with its body read anew.
func rewind(req *http.Request) (*http.Request, error) {
	out := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return out, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("ratekit: outbound: retry: %w", err)
	}
	out.Body = body
	return out, nil
}

// drain reads a little of a body not returned, so that its connection can
// be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// closeBody closes a request's body, which a RoundTripper must do even on
// failure.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
