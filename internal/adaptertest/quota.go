package adaptertest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/ratekit/ratekit/core"
)

// AnswerStatusHeader, on a request to GET / of an app that [Harness.New]
// makes, names the status the handler answers with (body "ok"), in place of
// 200.
const AnswerStatusHeader = "X-Answer-Status"

// AnswerErrorHeader, on a request to GET / of an app that [Harness.New]
// makes, names a status that the handler returns as its framework's error
// (echo.NewHTTPError, fiber.NewError), for frameworks whose handlers
// return errors; the others answer it as [AnswerStatusHeader] does.
const AnswerErrorHeader = "X-Answer-Error"

// AnswerStatus returns the status that the request r asks GET / to answer
// with, 200 when it asks none, and whether it asks for an error.
func AnswerStatus(header func(string) string) (status int, asError bool) {
	if s, err := strconv.Atoi(header(AnswerErrorHeader)); err == nil {
		return s, true
	}
	if s, err := strconv.Atoi(header(AnswerStatusHeader)); err == nil {
		return s, false
	}
	return http.StatusOK, false
}

// getAnswering serves GET / from client, asking the handler to answer
// status, as a written status or as a returned error.
func getAnswering(app App, client string, status int, asError bool) Response {
	r := NewRequest(http.MethodGet, "/", client)
	h := AnswerStatusHeader
	if asError {
		h = AnswerErrorHeader
	}
	r.Header.Set(h, strconv.Itoa(status))
	return app(r)
}

// A rule set replaced while the middleware serves takes effect at the next
// request and keeps what was spent; a bad set is refused and the old one
// stays.
func testRuleSet(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	set, err := core.NewRuleSet([]core.Rule{FixedRule("default", 1)})
	if err != nil {
		t.Fatal(err)
	}
	app := build(t, h, l, nil, Setup{Config: configWith(set, nil)})
	statuses := func(n int) string {
		var s []int
		for range n {
			s = append(s, app.Get("/", "a").Status)
		}
		return fmt.Sprint(s)
	}
	if got, want := statuses(2), "[200 429]"; got != want {
		t.Fatalf("under 1 per minute: %s, want %s", got, want)
	}
	if err := set.Replace([]core.Rule{FixedRule("default", 3)}); err != nil {
		t.Fatal(err)
	}
	// one unit was spent under the old limit: two are left of three
	if got, want := statuses(3), "[200 200 429]"; got != want {
		t.Errorf("raised to 3 per minute: %s, want %s", got, want)
	}
	bad := FixedRule("default", 3)
	bad.Key = nil
	if err := set.Replace([]core.Rule{bad}); err == nil {
		t.Fatal("Replace took a rule without a key function")
	}
	if r := app.Get("/", "b"); r.Status != http.StatusOK || r.Header.Get("X-RateLimit-Limit") != "3" {
		t.Errorf("after a refused set: %d, X-RateLimit-Limit %q; want 200 under the old set's 3", r.Status, r.Header.Get("X-RateLimit-Limit"))
	}
	if _, err := h.New(t, l, []core.Rule{FixedRule("default", 1)}, Setup{Config: configWith(set, nil)}); err == nil {
		t.Error("New took rules and a rule set")
	}
}

// A rule that counts only 401 answers spends nothing for other answers,
// written or returned as errors, and denies once the 401s spent it, the
// right answer included.
func testCountOnly(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	only401 := map[string]func(int) bool{"login": func(s int) bool { return s == http.StatusUnauthorized }}
	rules := []core.Rule{FixedRule("global", 100), FixedRule("login", 3)}
	app := build(t, h, l, rules, Setup{Config: configWith(nil, only401)})
	for i, asError := range []bool{false, true, false, true, false} {
		status := []int{http.StatusNoContent, http.StatusForbidden, http.StatusOK}[i%3]
		if r := getAnswering(app, "a", status, asError); r.Status != status {
			t.Fatalf("answer %d (%d, as error %v): %d", i, status, asError, r.Status)
		}
	}
	var got []int
	for i := range 4 {
		got = append(got, getAnswering(app, "a", http.StatusUnauthorized, i%2 == 1).Status)
	}
	if want := "[401 401 401 429]"; fmt.Sprint(got) != want {
		t.Errorf("401 answers: %v, want %s", got, want)
	}
	r := getAnswering(app, "a", http.StatusNoContent, false)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("a right answer once spent: %d, Retry-After %q; want 429 with one", r.Status, r.Header.Get("Retry-After"))
	}
	// the global rule counted every allowed request, whatever its answer;
	// a denied one spent nothing of either (one identity: one group)
	if got, want := r.Header.Get("RateLimit"), `"global";r=92;t=30, "login";r=0;t=30`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if _, err := h.New(t, l, rules, Setup{Config: configWith(nil, map[string]func(int) bool{"nope": only401["login"]})}); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("CountOnly of a rule the middleware lacks: %v, want ErrInvalidName", err)
	}
}

// Concurrent failures under a count-only rule of 3 get exactly three
// answers that count, and the others are denied: the unit is reserved
// before the handler runs.
func testCountOnlyConcurrent(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	only401 := map[string]func(int) bool{"login": func(s int) bool { return s == http.StatusUnauthorized }}
	app := build(t, h, l, []core.Rule{FixedRule("login", 3)}, Setup{Config: configWith(nil, only401)})
	counts := CountConcurrent(20, func() int { return getAnswering(app, "a", http.StatusUnauthorized, false).Status })
	if got, want := fmt.Sprint(counts), "map[401:3 429:17]"; got != want {
		t.Errorf("20 concurrent failures: %s, want %s", got, want)
	}
}

// CountConcurrent runs do n times at once and counts the statuses it
// returns.
func CountConcurrent(n int, do func() int) map[int]int {
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			s := do()
			mu.Lock()
			counts[s]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}
