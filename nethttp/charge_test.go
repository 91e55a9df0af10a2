package nethttp_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
)

// tokenServer serves a streamed answer of the tokens the query asks for,
// one line each, reporting each line's cost as it goes out; a request with
// panic=N panics once N lines are out. It returns the server, its limiter
// and rule, and a channel that tells how many lines each answer sent.
func tokenServer(t *testing.T, budget int) (*httptest.Server, *core.Limiter, core.Rule, chan int) {
	t.Helper()
	store, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := core.NewLimiter(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := core.Rule{Name: "tokens", Limit: core.PerHour(budget), Key: func(core.Request) (string, error) { return "apikey:k", nil }}
	sent := make(chan int, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := strconv.Atoi(req.URL.Query().Get("tokens"))
		panicAt, _ := strconv.Atoi(req.URL.Query().Get("panic"))
		i := 0
		defer func() { sent <- i }()
		for ; i < n; i++ {
			if panicAt > 0 && i == panicAt {
				panic(http.ErrAbortHandler)
			}
			if _, err := fmt.Fprintf(w, "token %d\n", i); err != nil {
				return
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return
			}
			nethttp.AddCost(req, 1)
			select {
			case <-req.Context().Done():
				i++
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	srv := httptest.NewServer(nethttp.MustNew(l, []core.Rule{r}, nethttp.WithCharged("tokens"))(h))
	t.Cleanup(srv.Close)
	return srv, l, r, sent
}

// spentBecomes waits until the key has spent want units, as the charge in
// the background lands.
func spentBecomes(t *testing.T, l *core.Limiter, r core.Rule, budget, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := l.Peek(context.Background(), r, "apikey:k")
		if err != nil {
			t.Fatal(err)
		}
		if budget-p.Remaining == want || want > budget && !p.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spent %d, want %d", budget-p.Remaining, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestChargedAnswerDebt: an answer of 150 tokens on a budget of 100 is
// charged whole once it is done, and the next request is denied with the
// debt in its headers: nothing remaining, and a Retry-After.
func TestChargedAnswerDebt(t *testing.T) {
	srv, l, r, sent := tokenServer(t, 100)
	resp, err := http.Get(srv.URL + "?tokens=150")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		lines++
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || lines != 150 || <-sent != 150 {
		t.Fatalf("first answer: %d with %d lines", resp.StatusCode, lines)
	}
	spentBecomes(t, l, r, 100, 150)
	resp, err = http.Get(srv.URL + "?tokens=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("after a debt: %d %v, want 429 with nothing remaining and a Retry-After", resp.StatusCode, resp.Header)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 30*36 {
		// 51 units of 36 s each until one fits
		t.Fatalf("Retry-After %d s, want the debt's %d s", ra, 51*36)
	}
}

// TestChargedAnswerCut: a client that reads 10 lines of an answer of 1000
// and hangs up is charged what was sent, not what was asked.
func TestChargedAnswerCut(t *testing.T) {
	srv, l, r, sent := tokenServer(t, 10_000)
	resp, err := http.Get(srv.URL + "?tokens=1000")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for range 10 {
		sc.Scan()
	}
	resp.Body.Close()
	n := <-sent
	if n < 10 || n >= 1000 {
		t.Fatalf("the handler sent %d lines, want the stream cut early", n)
	}
	spentBecomes(t, l, r, 10_000, n)
}

// TestChargedAnswerPanic: a handler that panics after 5 lines went out is
// charged those 5.
func TestChargedAnswerPanic(t *testing.T) {
	srv, l, r, sent := tokenServer(t, 100)
	resp, err := http.Get(srv.URL + "?tokens=50&panic=5")
	if err == nil {
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		}
		resp.Body.Close()
	}
	if n := <-sent; n != 5 {
		t.Fatalf("the handler sent %d lines before its panic, want 5", n)
	}
	spentBecomes(t, l, r, 100, 5)
}
