package livepage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/livepage"
)

type idRequest string

func (idRequest) Method() string               { return "GET" }
func (idRequest) Path() string                 { return "/" }
func (idRequest) Route() string                { return "" }
func (idRequest) Header(string) string         { return "" }
func (idRequest) Query(string) string          { return "" }
func (r idRequest) RemoteAddr() string         { return string(r) }
func (idRequest) HeaderValues(string) []string { return nil }
func (idRequest) Context() context.Context     { return context.Background() }

// fixture returns a page over a Limiter on the memory store with one rule
// of 1 per minute per identity, and a function that sends one request of
// an identity through the Limiter.
func fixture(t *testing.T, opts livepage.Options) (*livepage.Handler, *core.Limiter, []core.Rule, func(id string)) {
	t.Helper()
	rec, err := livepage.NewRecorder(livepage.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	l, err := core.NewLimiter(testkit.MustMemory(), core.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(1), Key: func(r core.Request) (string, error) {
		return r.RemoteAddr(), nil
	}}}
	h, err := livepage.New(opts, livepage.Source{Limiter: l, Recorder: rec, Rules: func() []core.Rule { return rules }})
	if err != nil {
		t.Fatal(err)
	}
	send := func(id string) {
		if _, err := l.Check(context.Background(), idRequest(id), rules); err != nil {
			t.Fatal(err)
		}
	}
	return h, l, rules, send
}

func do(t *testing.T, h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func status(t *testing.T, h http.Handler) map[string]any {
	t.Helper()
	w := do(t, h, "GET", "/ratekit/status.json")
	if w.Code != 200 {
		t.Fatalf("status.json: %d %s", w.Code, w.Body)
	}
	var st map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// offenders returns the first rule's offenders from a status.json.
func offenders(t *testing.T, st map[string]any) (string, []any) {
	t.Helper()
	rules := st["rules"].([]any)
	if len(rules) != 1 {
		t.Fatalf("%d rules, want 1", len(rules))
	}
	r := rules[0].(map[string]any)
	return r["name"].(string), r["offenders"].([]any)
}

func TestStatusShowsOffendersHashedOrShown(t *testing.T) {
	for _, show := range []bool{false, true} {
		h, _, _, send := fixture(t, livepage.Options{ShowIdentities: show})
		for range 4 {
			send("ip:192.0.2.7")
		}
		send("ip:192.0.2.8")
		name, offs := offenders(t, status(t, h))
		if name != "default" || len(offs) != 1 {
			t.Fatalf("show=%v: rule %q offenders %v, want default with one", show, name, offs)
		}
		o := offs[0].(map[string]any)
		id, denied := o["identity"].(string), o["denied"].(float64)
		if denied != 3 {
			t.Errorf("show=%v: denied %v, want 3", show, denied)
		}
		if show && id != "ip:192.0.2.7" || !show && (strings.Contains(id, "192.0.2") || !strings.HasPrefix(id, "ip:") || len(id) != len("ip:")+12) {
			t.Errorf("show=%v: identity %q", show, id)
		}
		w := do(t, h, "GET", "/ratekit/status.json")
		if !show && strings.Contains(w.Body.String(), "192.0.2") {
			t.Errorf("the status holds an identity though not shown:\n%s", w.Body)
		}
	}
}

// TestHashedWholeUnlessKind: an identity whose part before the first
// colon is no kind (a descriptor of ratekit-server's, whose value holds a
// colon) is hashed whole, so no part of the value shows.
func TestHashedWholeUnlessKind(t *testing.T) {
	h, _, _, send := fixture(t, livepage.Options{})
	send("d|user=alice:x")
	send("d|user=alice:x")
	_, offs := offenders(t, status(t, h))
	if len(offs) != 1 {
		t.Fatalf("offenders %v, want one", offs)
	}
	if id := offs[0].(map[string]any)["identity"].(string); strings.Contains(id, "alice") || len(id) != 12 {
		t.Errorf("identity shown as %q, want 12 hex digits", id)
	}
}

func TestPeekIsLimiterPeek(t *testing.T) {
	h, l, rules, send := fixture(t, livepage.Options{})
	send("ip:192.0.2.7")
	want, err := l.Peek(context.Background(), rules[0], "ip:192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	w := do(t, h, "GET", "/ratekit/peek?identity=ip:192.0.2.7")
	var got []livepage.Quota
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != 1 {
		t.Fatalf("peek: %v %s", err, w.Body)
	}
	if q := got[0]; q.Rule != "default" || q.Remaining != want.Remaining || q.Allowed != want.Allowed || q.Capacity != 1 ||
		q.RetryAfter/1000 != want.RetryAfter.Milliseconds()/1000 {
		t.Errorf("peek %+v, Limiter.Peek %+v", q, want)
	}
}

func TestWritesNeedTokenAndSameOrigin(t *testing.T) {
	h, l, rules, send := fixture(t, livepage.Options{Token: "s3cret"})
	send("ip:192.0.2.7")
	reset := "/ratekit/reset?rule=default&identity=ip:192.0.2.7"
	for _, c := range []struct {
		name   string
		method string
		header []string
		want   int
	}{
		{"no token", "POST", nil, 401},
		{"wrong token", "POST", []string{"Authorization", "Bearer guess"}, 401},
		{"GET", "GET", []string{"Authorization", "Bearer s3cret"}, 405},
		{"cross-site", "POST", []string{"Authorization", "Bearer s3cret", "Sec-Fetch-Site", "cross-site"}, 403},
		{"other origin", "POST", []string{"Authorization", "Bearer s3cret", "Origin", "https://evil.example"}, 403},
	} {
		if w := do(t, h, c.method, reset, c.header...); w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.want)
		}
	}
	if res, _ := l.Peek(context.Background(), rules[0], "ip:192.0.2.7"); res.Remaining != 0 {
		t.Fatalf("a refused reset freed the identity: %+v", res)
	}
	if w := do(t, h, "POST", reset, "Authorization", "Bearer s3cret", "Sec-Fetch-Site", "same-origin"); w.Code != 204 {
		t.Fatalf("reset with the token: %d %s", w.Code, w.Body)
	}
	if res, _ := l.Peek(context.Background(), rules[0], "ip:192.0.2.7"); res.Remaining != 1 {
		t.Errorf("after the reset, remaining %d, want 1", res.Remaining)
	}

	ro, _, _, _ := fixture(t, livepage.Options{})
	if w := do(t, ro, "POST", reset, "Authorization", "Bearer "); w.Code != 403 {
		t.Errorf("a write to a read-only page: %d, want 403", w.Code)
	}
}

func TestPageIsOffline(t *testing.T) {
	h, _, _, _ := fixture(t, livepage.Options{})
	for _, p := range []string{"/ratekit/", "/ratekit/app.js", "/ratekit/style.css"} {
		w := do(t, h, "GET", p)
		if w.Code != 200 {
			t.Fatalf("%s: %d", p, w.Code)
		}
		body := strings.ReplaceAll(w.Body.String(), "http://www.w3.org/2000/svg", "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//cdn") {
			t.Errorf("%s loads something from elsewhere:\n%s", p, body)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", p, csp)
		}
	}
	if w := do(t, h, "GET", "/ratekit/nothing"); w.Code != 404 {
		t.Errorf("an unknown path: %d, want 404", w.Code)
	}
}
