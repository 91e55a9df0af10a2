package caddyratekit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ratekit/ratekit/caddyratekit"
)

// fromJSON decodes a handler's JSON as Caddy does (unknown fields are
// errors).
func fromJSON(t testing.TB, js string) *caddyratekit.Handler {
	t.Helper()
	h := new(caddyratekit.Handler)
	if err := caddy.StrictUnmarshalJSON([]byte(js), h); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	return h
}

// fromCaddyfile parses a ratekit directive's tokens.
func fromCaddyfile(t *testing.T, src string) *caddyratekit.Handler {
	t.Helper()
	h := new(caddyratekit.Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(src)); err != nil {
		t.Fatalf("parsing %q: %v", src, err)
	}
	return h
}

// quiet is the logger the tests give their handlers' Limiters: the
// contexts of the tests have no Caddy config, so Caddy logs at Debug,
// every decision included.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// provision provisions and validates h as Caddy does, and cleans it up
// when the test ends.
func provision(t testing.TB, h *caddyratekit.Handler) {
	t.Helper()
	if err := tryProvision(t, h); err != nil {
		t.Fatal(err)
	}
}

// tryProvision is provision returning the error of Provision or Validate;
// on an error it cleans up as Caddy does.
func tryProvision(t testing.TB, h *caddyratekit.Handler) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	err := h.Provision(ctx)
	if err == nil {
		err = h.Validate()
	}
	if err != nil {
		cleanup(t, h)
		cancel()
		return err
	}
	caddyratekit.SetLimiterLogger(h, quiet)
	t.Cleanup(func() {
		cleanup(t, h)
		cancel()
	})
	return nil
}

func cleanup(t testing.TB, h *caddyratekit.Handler) {
	t.Helper()
	if err := h.Cleanup(); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
}

// answer is what a request through a handler came to.
type answer struct {
	status  int         // the status written, or of the returned error
	header  http.Header // the response's header
	body    string      // what next wrote
	err     error       // what ServeHTTP returned
	next    bool        // next ran
	repl    *caddy.Replacer
	request *http.Request // as next saw it
}

// placeholder returns the value of a placeholder after the request.
func (a answer) placeholder(name string) string {
	v, _ := a.repl.GetString(name)
	return v
}

// serve sends r through h, in front of a next handler that answers "ok"
// and echoes the request's body, as a Caddy server would: the request is
// prepared with a replacer and Caddy's variables, and clientIP, when set,
// is Caddy's client_ip for it (as trusted_proxies would make it).
func serve(t *testing.T, h *caddyratekit.Handler, r *http.Request, clientIP string) answer {
	t.Helper()
	repl := caddy.NewReplacer()
	w := httptest.NewRecorder()
	r = caddyhttp.PrepareRequest(r, repl, w, nil)
	if clientIP != "" {
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, clientIP)
	}
	a := answer{repl: repl}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		a.next, a.request = true, r
		body, _ := io.ReadAll(r.Body)
		_, err := io.WriteString(w, "ok"+string(body))
		return err
	})
	a.err = h.ServeHTTP(w, r, next)
	a.header, a.body, a.status = w.Header(), w.Body.String(), w.Code
	var he caddyhttp.HandlerError
	if errors.As(a.err, &he) {
		a.status = he.StatusCode
	}
	return a
}

// get sends a GET of path through h from the client at clientIP.
func get(t *testing.T, h *caddyratekit.Handler, path, clientIP string) answer {
	t.Helper()
	return serve(t, h, httptest.NewRequest(http.MethodGet, path, nil), clientIP)
}

// redisURL starts a miniredis for the test and returns its URL.
func redisURL(t *testing.T) (*miniredis.Miniredis, string) {
	t.Helper()
	mr := miniredis.RunT(t)
	return mr, "redis://" + mr.Addr()
}

// handlerJSON returns the JSON of a handler on url with the given rules
// and other fields (a JSON object's members, without braces). Unless more
// sets one, its Redis deadline is [storeTimeout].
func handlerJSON(url, rules, more string) string {
	js := `{"redis":{"url":` + quote(url) + `},"rules":[` + rules + `]`
	if !strings.Contains(more, `"timeout"`) {
		js += `,"timeout":"` + storeTimeout.String() + `"`
	}
	if more != "" {
		js += "," + more
	}
	return js + "}"
}

// storeTimeout is the Redis deadline of the tests' handlers unless they
// set one: far above the library's 50 ms, since the tests run under the
// race detector on a busy machine, where a short deadline would turn a
// moment of CPU starvation into a false outage.
const storeTimeout = time.Second

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// statuses returns the status of each answer, as a string like
// "200 200 429".
func statuses(as []answer) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(a.status))
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// tryProvisionNoCleanup provisions and validates h, leaving its cleanup to
// the caller.
func tryProvisionNoCleanup(h *caddyratekit.Handler) error {
	ctx, _ := caddy.NewContext(caddy.Context{Context: context.Background()})
	err := h.Provision(ctx)
	if err == nil {
		err = h.Validate()
	}
	if err == nil {
		caddyratekit.SetLimiterLogger(h, quiet)
	}
	return err
}
