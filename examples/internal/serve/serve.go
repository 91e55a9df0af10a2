// Package serve holds what the example apps and the demo share to serve
// HTTP, apart from package app, so that the demo builds none of what app
// needs for its flags, metrics and rules files.
package serve

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Server serves an app's routes on a listener until Shutdown. An
// *http.Server is one; Fiber's app needs a two-method wrapper.
type Server interface {
	// Serve accepts connections on ln until Shutdown; it may return
	// http.ErrServerClosed then.
	Serve(ln net.Listener) error
	// Shutdown stops accepting connections and waits, until ctx ends, for
	// requests in flight to finish.
	Shutdown(ctx context.Context) error
}

// StoreTimeout is a store deadline for a store in the caller's own process
// on a busy machine (the demo, the apps' own tests), far above the
// library's default of 50 ms (core.DefaultTimeout), where a short
// deadline would turn a moment of CPU starvation into a false outage. The
// apps keep the library's default unless -timeout raises it, as a service
// next to its Redis should.
const StoreTimeout = time.Second

// HTTPServer returns an *http.Server for h with the timeouts a server
// facing the internet needs.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}
