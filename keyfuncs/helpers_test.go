package keyfuncs_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/ratekit/ratekit/core"
)

// fakeRequest is a core.Request built field by field, so tests control every
// header line, including ones net/http would not produce.
type fakeRequest struct {
	ctx    context.Context
	method string
	path   string
	route  string
	remote string
	header http.Header
	query  url.Values
}

func (r *fakeRequest) Context() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}
func (r *fakeRequest) Method() string                    { return r.method }
func (r *fakeRequest) Path() string                      { return r.path }
func (r *fakeRequest) Route() string                     { return r.route }
func (r *fakeRequest) Header(name string) string         { return r.header.Get(name) }
func (r *fakeRequest) HeaderValues(name string) []string { return r.header.Values(name) }
func (r *fakeRequest) Query(name string) string          { return r.query.Get(name) }
func (r *fakeRequest) RemoteAddr() string                { return r.remote }

// newRequest returns a GET / request from remote with the given header lines,
// as name, value pairs; a name may repeat to add several lines.
func newRequest(remote string, headerPairs ...string) *fakeRequest {
	r := &fakeRequest{method: "GET", path: "/", remote: remote, header: http.Header{}, query: url.Values{}}
	for i := 0; i+1 < len(headerPairs); i += 2 {
		r.header.Add(headerPairs[i], headerPairs[i+1])
	}
	return r
}

// identity runs fn on r and returns its identity, or "" after checking that
// the error wraps core.ErrNoIdentity.
func identity(t testing.TB, fn core.KeyFunc, r core.Request) string {
	t.Helper()
	id, err := fn(r)
	if err != nil {
		if !errors.Is(err, core.ErrNoIdentity) {
			t.Fatalf("error %q does not wrap core.ErrNoIdentity", err)
		}
		if id != "" {
			t.Fatalf("identity %q returned with error %q", id, err)
		}
		return ""
	}
	if id == "" {
		t.Fatal("empty identity without error")
	}
	return id
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
