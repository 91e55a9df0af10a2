//go:build linux

package gatewaytest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestBalancer checks what TestTraefik relies on: requests, on one kept
// connection, go to the backends in turn, with X-Forwarded-For as sent;
// a backend down is skipped; with none, the connection is closed without
// an answer.
func TestBalancer(t *testing.T) {
	var got [2][]string
	var backends [2]*httptest.Server
	for i := range backends {
		backends[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got[i] = append(got[i], r.Header.Get("X-Forwarded-For"))
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		}))
		defer backends[i].Close()
	}
	b, err := StartBalancer(backends[0].Listener.Addr().String(), backends[1].Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	ask := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", "http://"+b.Addr()+"/check", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	for range 4 {
		resp, err := ask()
		if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
			t.Fatalf("%v %v", resp, err)
		}
	}
	want := []string{"203.0.113.7", "203.0.113.7"}
	if !slices.Equal(got[0], want) || !slices.Equal(got[1], want) {
		t.Fatalf("the backends saw X-Forwarded-For %q and %q; want %q each", got[0], got[1], want)
	}
	backends[1].Close()
	for range 2 {
		if _, err := ask(); err != nil {
			t.Fatalf("with one backend down: %v", err)
		}
	}
	if len(got[0]) != 4 {
		t.Fatalf("the backend up got %d of 2 requests more", len(got[0])-2)
	}
	backends[0].Close()
	if resp, err := ask(); err == nil {
		t.Fatalf("with no backend: %d, want the connection closed", resp.StatusCode)
	}
	if c := b.Conns(); !slices.Equal(c, []int64{4, 2}) {
		t.Fatalf("connections %v, want [4 2]", c)
	}
}
