package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/examples/internal/apptest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// The test binary doubles as the app: apptest starts it as a process.
func TestMain(m *testing.M) { apptest.Main(m, main) }

func TestBadFlags(t *testing.T) { apptest.CheckBadFlags(t) }

const adminToken = "tok"

var client = &http.Client{Transport: &http.Transport{}, Timeout: 60 * time.Second}

// answer is what post saw: the status, the header and the lines.
type answer struct {
	status int
	header http.Header
	lines  []string
}

// post posts body to the app at base with API key key and reads the
// whole answer.
func post(t *testing.T, base, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+CompletePath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", CompletePath, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read the answer: %v", CompletePath, err)
	}
	return answer{resp.StatusCode, resp.Header, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")}
}

// quota returns the key's quota under the budget, as the admin route of
// the app at base reads it from Redis.
func quota(t *testing.T, base, key string) app.Quota {
	t.Helper()
	r := apptest.Get(t, base, app.AdminQuotaPath+"?rule="+app.DefaultRule+"&identity="+apptest.APIKeyIdentity(key),
		"Authorization", "Bearer "+adminToken)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", app.AdminQuotaPath, r.Status, r.Body)
	}
	var q app.Quota
	if err := json.Unmarshal([]byte(r.Body), &q); err != nil {
		t.Fatalf("GET %s: %v: %s", app.AdminQuotaPath, err, r.Body)
	}
	return q
}

// quotaBecomes polls the key's quota until ok accepts it: a charge lands
// in the background once its answer is done.
func quotaBecomes(t *testing.T, base, key string, ok func(app.Quota) bool) app.Quota {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q := quota(t, base, key)
		if ok(q) {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quota of %s stays %+v", key, q)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sentBy waits until the app has logged the completion of n tokens
// asked for, and returns the tokens it sent.
func sentBy(t *testing.T, p *apptest.Proc, n int) int {
	t.Helper()
	re := regexp.MustCompile(`msg=completion tokens=` + strconv.Itoa(n) + ` sent=(\d+)`)
	p.WaitLog(t, "msg=completion tokens="+strconv.Itoa(n)+" ")
	m := re.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no completion of %d tokens logged:\n%s", n, p.Log())
	}
	sent, _ := strconv.Atoi(m[1])
	return sent
}

// replicas starts two replicas of the app on one real redis-server with
// args.
func replicas(t *testing.T, args ...string) (a, b *apptest.Proc) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	args = append([]string{"-redis", srv.Addr()}, args...)
	env := app.AdminTokenEnv + "=" + adminToken
	return apptest.Start(t, args, env), apptest.Start(t, args, env)
}

// TestSharedBudget: two replicas on one Redis share a key's budget of 100
// tokens a day. An answer of 150 tokens on replica A is streamed whole and
// charged whole, into a debt of 50; replica B then answers the key 429,
// with a Retry-After until 51 tokens have refilled, while another key
// still gets its tokens. /healthz is never limited.
func TestSharedBudget(t *testing.T) {
	a, b := replicas(t, "-limit", "100", "-period", "24h")
	r := post(t, a.URL, "K", `{"tokens": 150}`)
	if r.status != http.StatusOK || len(r.lines) != 150 || r.lines[149] != "token 150" {
		t.Fatalf("150 tokens on A: status %d, %d lines, want 200 and 150", r.status, len(r.lines))
	}
	if got := r.header.Get("X-Ratelimit-Remaining"); got != "99" {
		t.Errorf("150 tokens on A: X-RateLimit-Remaining %q, want 99 (one unit up front)", got)
	}
	if sent := sentBy(t, a, 150); sent != 150 {
		t.Errorf("A sent %d tokens, want 150", sent)
	}
	q := quotaBecomes(t, b.URL, "K", func(q app.Quota) bool { return q.RetryAfter > 0 })
	const tokenTime = 24 * 60 * 60 / 100 // seconds for one token to refill
	if q.Remaining != 0 || q.RetryAfter < 50*tokenTime || q.RetryAfter > 51*tokenTime {
		t.Errorf("after 150 tokens, as B reads it: %+v, want nothing remaining and 51 tokens to wait (%d s)", q, 51*tokenTime)
	}

	r = post(t, b.URL, "K", `{"tokens": 1}`)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("1 token on B after the debt: status %d, want 429", r.status)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 50*tokenTime || ra > 51*tokenTime {
		t.Errorf("1 token on B: Retry-After %q, want about %d s", r.header.Get("Retry-After"), 51*tokenTime)
	}
	if got := r.header.Get("X-Ratelimit-Remaining"); got != "0" {
		t.Errorf("1 token on B: X-RateLimit-Remaining %q, want 0", got)
	}
	if got := r.header.Get("X-Ratelimit-Limit"); got != "100" {
		t.Errorf("1 token on B: X-RateLimit-Limit %q, want 100", got)
	}
	if r := post(t, a.URL, "K", `{"tokens": 1}`); r.status != http.StatusTooManyRequests {
		t.Errorf("1 token on A after the debt: status %d, want 429", r.status)
	}

	r = post(t, b.URL, "K2", `{"tokens": 3}`)
	if r.status != http.StatusOK || strings.Join(r.lines, ",") != "token 1,token 2,token 3" {
		t.Errorf("3 tokens of another key on B: status %d, lines %q", r.status, r.lines)
	}
	if r := apptest.Get(t, b.URL, app.PagePath+"status.json"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"default"`) {
		t.Errorf("GET %sstatus.json: status %d, body %.200q; want 200 with the default rule", app.PagePath, r.Status, r.Body)
	}
	for range 5 {
		if r := apptest.Get(t, b.URL, app.HealthzPath); r.Status != http.StatusOK || r.Header.Get("X-Ratelimit-Limit") != "" {
			t.Errorf("GET /healthz: status %d, X-RateLimit-Limit %q; want 200 and none", r.Status, r.Header.Get("X-Ratelimit-Limit"))
		}
	}
}

// TestCutStream: a client that reads 3 tokens of 1000 on replica A and
// closes the stream is charged the tokens A sent, exactly, as replica B
// reads the budget and shows it in the next answer's header fields.
func TestCutStream(t *testing.T) {
	a, b := replicas(t, "-limit", "1000", "-period", "24h")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+CompletePath, strings.NewReader(`{"tokens": 1000}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", "K")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for i := range 3 {
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d lines: %v", i, sc.Err())
		}
	}
	cancel()
	resp.Body.Close()

	sent := sentBy(t, a, 1000)
	if sent < 3 || sent >= 1000 {
		t.Fatalf("A sent %d tokens of a stream cut after 3, want it cut early", sent)
	}
	want := 1000 - sent
	q := quotaBecomes(t, b.URL, "K", func(q app.Quota) bool { return q.Remaining <= want })
	if q.Remaining != want {
		t.Errorf("after a stream cut at %d tokens: %d remaining, want %d", sent, q.Remaining, want)
	}
	r := post(t, b.URL, "K", `{"tokens": 2}`)
	if r.status != http.StatusOK || len(r.lines) != 2 {
		t.Fatalf("2 tokens on B: status %d, %d lines", r.status, len(r.lines))
	}
	if got, want := r.header.Get("X-Ratelimit-Remaining"), strconv.Itoa(want-1); got != want {
		t.Errorf("2 tokens on B after the cut: X-RateLimit-Remaining %s, want %s (1000 - %d sent - 1 up front)", got, want, sent)
	}
}

// TestDefaults starts the app with no flags: an embedded miniredis, a
// budget of 1000 tokens a minute per API key, and its try-it command. Bad
// bodies are answered 400 and spend nothing. (Debts are TestSharedBudget's:
// a budget of a minute refills in the seconds a long stream takes.)
func TestDefaults(t *testing.T) {
	p := apptest.Start(t, nil)
	p.WaitLog(t, "try it")
	for _, want := range []string{`msg="store: embedded miniredis"`, `default="1000 per 1m0s (gcra, burst 1000)"`, "key=apikey",
		`cmd="curl -N -H 'X-API-Key: my-key' -d '{\"tokens\": 3000}' ` + p.URL + CompletePath + `"`} {
		if !strings.Contains(p.Log(), want) {
			t.Errorf("the start-up log lacks %s:\n%s", want, p.Log())
		}
	}
	for _, c := range []struct{ body, want string }{
		{``, "want a JSON body"},
		{`{"tokens": "ten"}`, "want a JSON body"},
		{`{"tokens": 0}`, "tokens is 0: want 1 to 4096"},
		{`{"tokens": -5}`, "tokens is -5"},
		{`{"tokens": 4097}`, "tokens is 4097"},
		{`{"tokens": 1e30}`, "want a JSON body"},
		{`{}`, `"tokens" is missing`},
		{`{"tokens": 1, "model": "x"}`, "unknown field"},
		{`{"tokens": 1} {"tokens": 1}`, "nothing after it"},
		{`{"tokens": 1` + strings.Repeat(" ", 2000) + `}`, "too large"},
	} {
		r := post(t, p.URL, "K", c.body)
		if r.status != http.StatusBadRequest || !strings.Contains(strings.Join(r.lines, "\n"), c.want) {
			t.Errorf("body %.40q: status %d, %q; want 400 mentioning %q", c.body, r.status, r.lines, c.want)
		}
		if got := r.header.Get("X-Ratelimit-Remaining"); got != "" {
			t.Errorf("body %.40q: X-RateLimit-Remaining %q: a bad body is not limited", c.body, got)
		}
	}
	r := post(t, p.URL, "K", `{"tokens": 5}`)
	if r.status != http.StatusOK || len(r.lines) != 5 {
		t.Fatalf("5 tokens: status %d, %d lines", r.status, len(r.lines))
	}
	if got := r.header.Get("X-Ratelimit-Remaining"); got != "999" {
		t.Errorf("5 tokens: X-RateLimit-Remaining %q, want 999 (one up front): the bad bodies spent nothing", got)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}
