package server

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address from (any of 127/8 on Linux).
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestAdminGuessesThrottled: wrong admin tokens from one address are
// answered 401 up to RATEKIT_ADMIN_GUESSES, then 429, even with the right
// token from that address; each wrong one is logged with the address and
// without the token; the right token still works from another address.
func TestAdminGuessesThrottled(t *testing.T) {
	const token = "0123456789abcdef-right"
	set := testSettings(t, "RATEKIT_ADMIN_TOKEN", token, "RATEKIT_ADMIN_GUESSES", "3")
	var logs lockedBuffer
	s, err := New(set, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	}()
	_, port, _ := net.SplitHostPort(s.Addrs()[0])
	ask := func(c *http.Client, tok string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/admin/quota?domain=d&k=1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	guesser, admin := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	defer guesser.CloseIdleConnections()
	defer admin.CloseIdleConnections()
	var wrong []string
	for i := range 3 {
		tok := "guess-" + strings.Repeat(string(rune('a'+i)), 16)
		wrong = append(wrong, tok)
		if c := ask(guesser, tok); c != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, c)
		}
	}
	for i := range 5 {
		if c := ask(guesser, "guess-zzzzzzzzzzzzzzzz"); c != http.StatusTooManyRequests {
			t.Fatalf("wrong token past the limit (%d): %d, want 429", i+1, c)
		}
	}
	if c := ask(guesser, token); c != http.StatusTooManyRequests {
		t.Errorf("the right token from the throttled address: %d, want 429", c)
	}
	if c := ask(admin, token); c != http.StatusOK {
		t.Errorf("the right token from another address: %d, want 200", c)
	}
	out := logs.String()
	if n := strings.Count(out, "wrong admin token"); n < 3 {
		t.Errorf("%d wrong tokens logged, want at least 3:\n%s", n, out)
	}
	if !strings.Contains(out, "127.0.0.1") {
		t.Errorf("the log does not name the address:\n%s", out)
	}
	for _, tok := range append(wrong, "guess-zzzzzzzzzzzzzzzz", token) {
		if strings.Contains(out, tok) || strings.Contains(out, tok[6:]) {
			t.Errorf("the log holds a token (%s):\n%s", tok, out)
		}
	}
}
