package apptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// login posts a login attempt with password to the app at base.
func login(t testing.TB, base, password string) Response {
	t.Helper()
	return Do(t, http.MethodPost, base, app.LoginPath, app.PasswordHeader, password)
}

// TestLogin checks POST /login over a real redis-server: right passwords
// never spend the login rule; wrong ones do, and once they have, every
// attempt is answered 429 with Retry-After, the right password included;
// and 20 concurrent wrong attempts from a fresh client get exactly 3
// answers of 401 and 17 of 429.
func TestLogin(t *testing.T) {
	skipUnsupported(t)
	redistest.Require(t)
	srv := redistest.StartServer(t)
	p := Start(t, []string{"-redis", srv.Addr()}, app.LoginPasswordEnv+"=swordfish")
	for i := range 5 {
		if r := login(t, p.URL, "swordfish"); r.Status != http.StatusNoContent {
			t.Fatalf("right password #%d: status %d, want 204", i+1, r.Status)
		}
	}
	for i, want := range []int{401, 401, 401, 429} {
		if r := login(t, p.URL, "guess"); r.Status != want {
			t.Errorf("wrong password #%d: status %d, want %d", i+1, r.Status, want)
		}
	}
	if r := login(t, p.URL, "swordfish"); r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("right password once the failures are spent: status %d, Retry-After %q; want 429 with one", r.Status, r.Header.Get("Retry-After"))
	}

	// a client of its own: an X-Forwarded-For the app trusts from loopback
	q := Start(t, []string{"-redis", srv.Addr(), "-trusted-proxies", "127.0.0.0/8"})
	counts := adaptertest.CountConcurrent(20, func() int {
		return Do(t, http.MethodPost, q.URL, app.LoginPath, app.PasswordHeader, "guess", "X-Forwarded-For", "203.0.113.9").Status
	})
	if got, want := fmt.Sprint(counts), "map[401:3 429:17]"; got != want {
		t.Errorf("20 concurrent wrong passwords: %s, want %s", got, want)
	}
}

// TestAdmin checks the admin routes over a real redis-server, with two
// instances of the app: they exist only with ADMIN_TOKEN, answer 401
// without it and are never limited for the right token; a peek spends
// nothing; a reset through one instance frees a client that the other
// denies from its denied-key cache, within a second; and wrong tokens are
// throttled per client ([checkAdminGuesses]).
func TestAdmin(t *testing.T) {
	skipUnsupported(t)
	redistest.Require(t)
	srv := redistest.StartServer(t)
	if r := Get(t, Start(t, nil).URL, app.AdminQuotaPath+"?rule=default&identity=ip:127.0.0.1"); r.Status != http.StatusNotFound {
		t.Errorf("admin route without ADMIN_TOKEN: status %d, want 404", r.Status)
	}
	token := app.AdminTokenEnv + "=s3cret"
	args := []string{"-redis", srv.Addr(), "-limit", "3", "-trusted-proxies", "127.0.0.0/8"}
	a, b := Start(t, args, token), Start(t, args, token)
	auth := []string{"Authorization", "Bearer s3cret"}
	const quota = app.AdminQuotaPath + "?rule=default&identity=ip:127.0.0.1"
	for i := range 6 {
		if r := Get(t, a.URL, quota); r.Status != http.StatusUnauthorized {
			t.Fatalf("quota without the token #%d: status %d, want 401", i+1, r.Status)
		}
	}
	for i, want := range []int{200, 200, 200, 429, 429} { // b's denied-key cache answers the last
		if r := Get(t, b.URL, app.RootPath); r.Status != want {
			t.Fatalf("GET / #%d: status %d, want %d", i+1, r.Status, want)
		}
	}
	var q app.Quota
	for range 2 { // a peek spends nothing
		r := Get(t, a.URL, quota, auth...)
		if err := json.Unmarshal([]byte(r.Body), &q); r.Status != http.StatusOK || err != nil {
			t.Fatalf("quota: status %d, body %q (%v)", r.Status, r.Body, err)
		}
		if q.Rule != "default" || q.Identity != "ip:127.0.0.1" || q.Limit != 3 || q.Remaining != 0 || q.RetryAfter < 1 || q.ResetAfter < q.RetryAfter {
			t.Errorf("quota of a spent client: %+v", q)
		}
	}
	for _, bad := range []string{"?rule=default", "?rule=nope&identity=ip:127.0.0.1"} {
		if r := Get(t, a.URL, app.AdminQuotaPath+bad, auth...); r.Status != http.StatusBadRequest && r.Status != http.StatusNotFound {
			t.Errorf("quota%s: status %d, want 400 or 404", bad, r.Status)
		}
	}
	if r := Do(t, http.MethodPost, a.URL, app.AdminResetPath+"?rule=default&identity=ip:127.0.0.1", auth...); r.Status != http.StatusNoContent {
		t.Fatalf("reset: status %d, want 204; body %q", r.Status, r.Body)
	}
	awaitReset(t, b, app.RootPath)
	checkAdminGuesses(t, a.URL, b.URL)
}

// checkAdminGuesses checks that the apps at base and other, which share a
// Redis, a token (s3cret) and the login limit of 3, throttle wrong admin
// tokens per client, as POST /login throttles wrong passwords: three wrong
// tokens are answered 401, and then every request with a token is
// answered 429 with Retry-After, on both apps, the right token included
// (else the throttle would not slow a guesser down), while a client that
// guessed nothing is never limited, however often it calls with the right
// token. A request without a token guesses nothing. Concurrent guesses of
// a fresh client get exactly three answers of 401.
func checkAdminGuesses(t *testing.T, base, other string) {
	t.Helper()
	const quota = app.AdminQuotaPath + "?rule=default&identity=ip:127.0.0.1"
	from := func(client, token string) []string {
		h := []string{"X-Forwarded-For", client}
		if token != "" {
			h = append(h, "Authorization", "Bearer "+token)
		}
		return h
	}
	var got []int
	for i := range 4 {
		got = append(got, Get(t, []string{base, other}[i%2], quota, from("203.0.113.5", fmt.Sprint("guess-", i))...).Status)
	}
	if want := "[401 401 401 429]"; fmt.Sprint(got) != want {
		t.Errorf("four wrong tokens from one client: %v, want %s", got, want)
	}
	r := Get(t, other, quota, from("203.0.113.5", "s3cret")...)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("the right token from a client that spent its guesses: status %d, Retry-After %q; want 429 with one", r.Status, r.Header.Get("Retry-After"))
	}
	if r := Get(t, base, quota, from("203.0.113.5", "")...); r.Status != http.StatusUnauthorized {
		t.Errorf("no token from that client: status %d, want 401", r.Status)
	}
	for i := range 10 {
		if r := Get(t, []string{base, other}[i%2], quota, from("198.51.100.8", "s3cret")...); r.Status != http.StatusOK {
			t.Fatalf("right token #%d from a client that guessed nothing: status %d, want 200", i+1, r.Status)
		}
	}
	counts := adaptertest.CountConcurrent(20, func() int {
		return Get(t, base, quota, from("192.0.2.77", "guess")...).Status
	})
	if got, want := fmt.Sprint(counts), "map[401:3 429:17]"; got != want {
		t.Errorf("20 concurrent wrong tokens: %s, want %s", got, want)
	}
}

// writeRules writes a rules file of the given content into dir.
// awaitReset waits until p, another process than the one a reset went
// through, allows GET path again. The reset reaches p's denied-key cache
// over Redis pub/sub, after the reset's own answer: until then p denies
// from its cache, which spends nothing. Any answer but 200 or 429 fails.
func awaitReset(t testing.TB, p *Proc, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status := Get(t, p.URL, path).Status
		if status == http.StatusOK {
			return
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("GET %s on the other process after the reset: %d, want 200 within 10 s", path, status)
		}
	}
}

func writeRules(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReload checks -rules and SIGHUP under traffic, over a real
// redis-server: a raised limit takes
// effect at once and counts what was spent; a bad file is logged and the
// rules stay; and no request fails meanwhile.
func TestReload(t *testing.T) {
	skipUnsupported(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, "rules:\n  default: {limit: 5, period: 1h}\n  strict: {limit: 2, period: 1h}\n")
	redistest.Require(t)
	srv := redistest.StartServer(t)
	p := Start(t, []string{"-rules", path, "-trusted-proxies", "127.0.0.0/8", "-redis", srv.Addr()})
	p.WaitLog(t, `default="5 per 1h0m0s (gcra, burst 5)"`) // the file's limits
	spend := func(n int) (statuses []int) {
		for range n {
			statuses = append(statuses, Get(t, p.URL, app.RootPath, "X-Forwarded-For", "192.0.2.1").Status)
		}
		return statuses
	}
	if got, want := fmt.Sprint(spend(6)), "[200 200 200 200 200 429]"; got != want {
		t.Fatalf("under 5 per hour: %s, want %s", got, want)
	}

	// traffic from another client while the rules change: only 200 or 429
	stop, bad := make(chan struct{}), make(chan int, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := Get(t, p.URL, app.HealthzPath) // warm connection, never limited
			if s := Get(t, p.URL, app.StrictPath, "X-Forwarded-For", "198.51.100.7").Status; r.Status != 200 || (s != 200 && s != 429) {
				select {
				case bad <- s:
				default:
				}
			}
		}
	})
	writeRules(t, path, "rules:\n  default: {limit: 8, period: 1h}\n  strict: {limit: 2, period: 1h}\n")
	p.Signal(t, syscall.SIGHUP)
	p.WaitLog(t, "SIGHUP: rules reloaded")
	// 5 of 8 were spent: 3 are left
	if got, want := fmt.Sprint(spend(4)), "[200 200 200 429]"; got != want {
		t.Errorf("raised to 8 per hour: %s, want %s", got, want)
	}
	writeRules(t, path, "rules:\n  default: {limit: 0}\n")
	p.Signal(t, syscall.SIGHUP)
	p.WaitLog(t, "SIGHUP: the rules file is not valid; the rules stay")
	if r := Get(t, p.URL, app.RootPath, "X-Forwarded-For", "192.0.2.1"); r.Status != http.StatusTooManyRequests || r.Header.Get("X-Ratelimit-Limit") != "8" {
		t.Errorf("after a bad file: status %d, limit %q; want 429 under the old 8", r.Status, r.Header.Get("X-Ratelimit-Limit"))
	}
	close(stop)
	wg.Wait()
	select {
	case s := <-bad:
		t.Errorf("a request during the reloads got status %d", s)
	default:
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

// TestPlans checks per-plan limits in jwt mode: a token's plan claim picks
// the default rule's limit of its plan; no plan, an unknown plan or no
// token get the default limit.
func TestPlans(t *testing.T) {
	skipUnsupported(t)
	path := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, path, `{"rules": {"default": {"limit": 10, "plans": {"pro": 100}}, "strict": {"limit": 2}}}`)
	p := Start(t, []string{"-rules", path, "-key", "jwt", "-jwt-secret", "k3y"})
	token := func(sub, plan string) string {
		claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
		if plan != "" {
			claims[app.PlanClaim] = plan
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("k3y"))
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	for _, tt := range []struct {
		auth, want string
	}{
		{token("alice", "pro"), "100"},
		{token("bob", ""), "10"},
		{token("carol", "enterprise"), "10"},
		{"", "10"},
	} {
		if r := Get(t, p.URL, app.RootPath, "Authorization", tt.auth); r.Status != 200 || r.Header.Get("X-Ratelimit-Limit") != tt.want {
			t.Errorf("%.30q: status %d, X-RateLimit-Limit %q; want 200, %s", tt.auth, r.Status, r.Header.Get("X-Ratelimit-Limit"), tt.want)
		}
	}
}
