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

// AnswerPanicHeader, on a request to GET / of an app that [Harness.New]
// makes, makes the handler panic with [ErrPanic]: "before" it answers, or
// "after" it has answered (written its status and body, or, in Fiber,
// set them), as [PanicIf] does.
const AnswerPanicHeader = "X-Answer-Panic"

// ErrPanic is the value a handler panics with when a request asks it to
// ([AnswerPanicHeader]); [HTTPApp] recovers it, as a server would.
var ErrPanic = errors.New("adaptertest: the handler panics, as asked")

// PanicIf panics with [ErrPanic] if the request whose header reads as header
// asks for a panic at this point of its handler: when is "before" or
// "after".
func PanicIf(header func(string) string, when string) {
	if header(AnswerPanicHeader) == when {
		panic(ErrPanic)
	}
}

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

// A handler that answers 401 and then panics has answered 401: the
// attempt counts, whatever the panic makes of the rest of the answer. One
// that panics before it answers has answered nothing, counted as a 500,
// which the rule does not count.
func testCountOnlyPanic(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	only401 := map[string]func(int) bool{"login": func(s int) bool { return s == http.StatusUnauthorized }}
	app := build(t, h, l, []core.Rule{FixedRule("login", 3)}, Setup{Config: configWith(nil, only401)})
	panicking := func(when string) {
		r := NewRequest(http.MethodGet, "/", "a")
		r.Header.Set(AnswerStatusHeader, strconv.Itoa(http.StatusUnauthorized))
		r.Header.Set(AnswerPanicHeader, when)
		app(r)
	}
	for range 3 {
		panicking("before")
	}
	if got, want := getAnswering(app, "a", http.StatusUnauthorized, false).Status, http.StatusUnauthorized; got != want {
		t.Fatalf("after three panics before any answer: status %d, want %d (nothing counted)", got, want)
	}
	for range 2 {
		panicking("after")
	}
	var got []int
	for range 3 {
		got = append(got, getAnswering(app, "a", http.StatusUnauthorized, false).Status)
	}
	if want := "[429 429 429]"; fmt.Sprint(got) != want {
		t.Errorf("after a 401 and two 401s followed by a panic, under 3: %v, want %s (every 401 counted)", got, want)
	}
}

// The answer that a count-only rule does not count carries the fields of
// the quota once its unit is given back: they are computed when its status
// is known, before it goes out. An answer that counts carries the quota
// it spent.
func testCountOnlyHeaders(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	only401 := map[string]func(int) bool{"login": func(s int) bool { return s == http.StatusUnauthorized }}
	rules := []core.Rule{FixedRule("global", 100), FixedRule("login", 3)}
	app := build(t, h, l, rules, Setup{Config: configWith(nil, only401)})
	for i, tt := range []struct {
		status  int
		asError bool
		want    map[string]string
	}{
		// a right answer from a fresh client: the login quota is full again
		{http.StatusNoContent, false, map[string]string{"RateLimit": `"global";r=99;t=30, "login";r=3;t=0`, "X-RateLimit-Remaining": "99", "X-RateLimit-Limit": "100"}},
		{http.StatusUnauthorized, false, map[string]string{"RateLimit": `"global";r=98;t=30, "login";r=2;t=30`, "X-RateLimit-Remaining": "2", "X-RateLimit-Limit": "3"}},
		{http.StatusNoContent, false, map[string]string{"RateLimit": `"global";r=97;t=30, "login";r=2;t=30`, "X-RateLimit-Remaining": "2"}},
		{http.StatusForbidden, true, map[string]string{"RateLimit": `"global";r=96;t=30, "login";r=2;t=30`, "X-RateLimit-Remaining": "2"}},
		{http.StatusUnauthorized, true, map[string]string{"RateLimit": `"global";r=95;t=30, "login";r=1;t=30`, "X-RateLimit-Remaining": "1"}},
		{http.StatusOK, false, map[string]string{"RateLimit": `"global";r=94;t=30, "login";r=1;t=30`, "X-RateLimit-Remaining": "1"}},
	} {
		r := getAnswering(app, "a", tt.status, tt.asError)
		if r.Status != tt.status {
			t.Fatalf("answer %d: status %d, want %d", i+1, r.Status, tt.status)
		}
		for name, want := range tt.want {
			if got := r.Header.Get(name); got != want {
				t.Errorf("answer %d (%d): %s %q, want %q", i+1, tt.status, name, got, want)
			}
		}
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
