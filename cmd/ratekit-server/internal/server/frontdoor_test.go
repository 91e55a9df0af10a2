package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/redisstore"
)

func testService(tb testing.TB) *service.Service {
	tb.Helper()
	mr := miniredis.RunT(tb)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	cs, _ := compat.New(rdb, compat.Options{})
	ns, _ := redisstore.New(rdb)
	cl, err := core.NewLimiter(cs, core.WithPrefix(""), core.WithDeniedCache(0), core.WithTimeout(time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	nl, err := core.NewLimiter(ns, core.WithPrefix(""), core.WithTimeout(time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cl.Close(); nl.Close(); ns.Close(); rdb.Close() })
	svc := service.New(cl, nl, stats.New(), service.Options{})
	c, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")}}, config.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	svc.SetConfig(c)
	return svc
}

// FuzzJSON posts any body to /json: 200, 429 or 400, never a panic. The
// seed corpus is in testdata/fuzz/FuzzJSON.
func FuzzJSON(f *testing.F) {
	h := jsonHandler(testService(f), 256<<10, discard)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(string(body))))
		switch w.Code {
		case 200, 429, 400:
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}

// TestJSONTooLarge: a body past the bound is refused with 413; one just
// under it is read.
func TestJSONTooLarge(t *testing.T) {
	const limit = 4 << 10
	h := jsonHandler(testService(t), limit, discard)
	for _, c := range []struct {
		size int
		want int
	}{{limit + 1, 413}, {limit, 400}} {
		body := `{"domain":"` + strings.Repeat("x", c.size-len(`{"domain":""}`)) + `"}`
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(body)))
		if w.Code != c.want {
			t.Fatalf("a body of %d bytes (bound %d): %d, want %d", len(body), limit, w.Code, c.want)
		}
	}
}

func TestAdmin(t *testing.T) {
	svc := testService(t)
	h := adminHandler(svc, "0123456789abcdef", discard)
	do := func(method, target, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h(w, r)
		return w
	}
	if w := do("GET", "/admin/quota?domain=d&k=1", ""); w.Code != 401 {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := do("GET", "/admin/quota?domain=d&k=1", "wrong-token-0000"); w.Code != 401 {
		t.Fatalf("a wrong token: %d", w.Code)
	}
	w := do("GET", "/admin/quota?domain=d&k=1", "0123456789abcdef")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"remaining":1`) {
		t.Fatalf("peek: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/admin/reset?domain=d&k=1", "0123456789abcdef"); w.Code != 204 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/admin/quota?domain=d&nothing=1", "0123456789abcdef"); w.Code != 400 {
		t.Fatalf("a descriptor without a limit: %d", w.Code)
	}
	if w := do("GET", "/admin/quota", "0123456789abcdef"); w.Code != 400 {
		t.Fatalf("no descriptor: %d", w.Code)
	}
}
