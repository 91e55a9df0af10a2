package app

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/nethttp"
)

// Admin routes, served when ADMIN_TOKEN is set, to requests with
// "Authorization: Bearer <ADMIN_TOKEN>". No rate limit applies to them, but
// wrong tokens are throttled per client IP, as wrong passwords are
// ([Rules.Admin]): once a client has sent as many wrong tokens as the
// login limit allows per period, every request of it that carries a token
// is answered 429 until the quota refills, the right token included
// (checking it would tell a guesser which guess is right). The right token
// spends nothing: a client that guessed nothing is never limited (but for
// a moment, when it sends more requests with tokens at once than the login
// limit: each holds a unit until its token is checked). A request without
// a token guesses nothing, and is answered 401 uncounted.
const (
	// AdminQuotaPath answers GET ?rule=R&identity=I with the identity's
	// quota under the rule, as JSON ([Quota]), without spending it.
	AdminQuotaPath = "/admin/quota"
	// AdminResetPath answers POST ?rule=R&identity=I with 204 once the
	// identity's quota under the rule is cleared, on every replica.
	AdminResetPath = "/admin/reset"
)

// Quota is the answer of GET /admin/quota. Waits are whole seconds,
// rounded up, as in Retry-After.
type Quota struct {
	Rule      string `json:"rule"`
	Identity  string `json:"identity"`
	Limit     int    `json:"limit"` // the rule's capacity, as X-RateLimit-Limit
	Remaining int    `json:"remaining"`
	// RetryAfter is the wait until one request passes: 0 when one would.
	RetryAfter int64 `json:"retry_after_seconds"`
	// ResetAfter is the wait until the quota is full again.
	ResetAfter int64 `json:"reset_after_seconds"`
}

// Unlimited reports whether no rate rule limits path: /healthz, /metrics,
// the live page ([PagePath]) and the admin routes, which health checks, Prometheus and operators call
// on their own schedule. (The admin routes throttle wrong tokens: see
// [AdminQuotaPath].)
func Unlimited(path string) bool {
	return path == HealthzPath || path == MetricsPath || strings.HasPrefix(path, "/admin/") || strings.HasPrefix(path, PagePath)
}

// adminHandler serves the admin routes over limiter's rules, to requests
// that carry token, and throttles wrong tokens by rules.Admin.
func adminHandler(limiter *core.Limiter, rules Rules, token string) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+AdminQuotaPath, func(w http.ResponseWriter, r *http.Request) {
		rule, identity, ok := adminQuery(w, r, rules)
		if !ok {
			return
		}
		res, err := limiter.Peek(r.Context(), rule, identity)
		if err != nil {
			adminError(w, http.StatusServiceUnavailable, "the quota cannot be read: "+err.Error())
			return
		}
		q := Quota{Rule: rule.Name, Identity: identity, Limit: res.Limit.Capacity(), Remaining: res.Remaining,
			RetryAfter: seconds(res.RetryAfter), ResetAfter: seconds(res.ResetAfter)}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(q) // an error means the client is gone
	})
	mux.HandleFunc("POST "+AdminResetPath, func(w http.ResponseWriter, r *http.Request) {
		rule, identity, ok := adminQuery(w, r, rules)
		if !ok {
			return
		}
		if err := limiter.Reset(r.Context(), rule.Name, identity); err != nil {
			adminError(w, http.StatusServiceUnavailable, "the quota cannot be reset: "+err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	want := []byte("Bearer " + token)
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratekit admin"`)
			adminError(w, http.StatusUnauthorized, "an admin route needs Authorization: Bearer <ADMIN_TOKEN>")
			return
		}
		mux.ServeHTTP(w, r)
	})
	// Each request with a token reserves a unit before the token is
	// compared, so that concurrent guesses cannot overrun the limit; only
	// the 401s keep it.
	throttle, err := nethttp.New(limiter, rules.Admin,
		nethttp.WithCountOnly(AdminRule, func(status int) bool { return status == http.StatusUnauthorized }),
		nethttp.WithSkip(func(r *http.Request) bool { return len(r.Header.Values("Authorization")) == 0 }))
	if err != nil {
		return nil, err
	}
	return throttle(auth), nil
}

// adminQuery returns the rule and identity a request names, or answers
// 400 or 404 and reports false.
func adminQuery(w http.ResponseWriter, r *http.Request, rules Rules) (core.Rule, string, bool) {
	name, identity := r.URL.Query().Get("rule"), r.URL.Query().Get("identity")
	if name == "" || identity == "" {
		adminError(w, http.StatusBadRequest, "want ?rule=R&identity=I, such as ?rule=default&identity=ip:127.0.0.1")
		return core.Rule{}, "", false
	}
	rule, err := rules.lookup(name)
	if err != nil {
		adminError(w, http.StatusNotFound, err.Error())
		return core.Rule{}, "", false
	}
	return rule, identity, true
}

// lookup returns the current rule named name.
func (r Rules) lookup(name string) (core.Rule, error) {
	for _, set := range [][]core.Rule{r.Default.Rules(), r.Strict.Rules(), r.Login} {
		for _, rule := range set {
			if rule.Name == name {
				return rule, nil
			}
		}
	}
	return core.Rule{}, errors.New("no rule named " + name + ": want default, strict or login")
}

// adminError answers status with a plain-text message.
func adminError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// seconds returns d in whole seconds, rounded up.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
