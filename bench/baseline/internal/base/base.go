// Package base holds what the baseline apps of the end-to-end benchmark
// share: their flags, their go-redis client and the one script call each
// request makes.
//
// A baseline app serves the routes of the example app of its framework
// (examples/<framework>) with the same framework set-up and the same
// bodies, but instead of ratekit's middleware its GET / handler makes one
// bare script call per request: INCR and PEXPIRE of a key of the client's
// IP, through a go-redis client configured as the example apps configure
// theirs (examples/internal/app/store.go). It is the floor for a request
// that consults Redis once: bench/cmd/e2e divides each example app's
// requests/s by its baseline's.
package base

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script is the baseline's only work per request: count the request under
// the client's key, and let the key expire after the period.
var Script = redis.NewScript("local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c")

// Routes and bodies, as in the example apps.
const (
	RootPath    = "/"
	HealthzPath = "/healthz"
)

// App is a baseline app's configuration and client.
type App struct {
	Addr     string
	Client   *redis.Client
	periodMS int64
}

// Parse reads the flags of the baseline app called name: -addr, -redis and
// -period, as the example apps name them. It exits on a bad flag.
func Parse(name string) *App {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	url := fs.String("redis", "", "Redis URL (required), e.g. redis://127.0.0.1:6380")
	period := fs.Duration("period", time.Minute, "expiry of each client's key")
	_ = fs.Parse(os.Args[1:])
	if *url == "" {
		fmt.Fprintf(os.Stderr, "%s: -redis is required\n", name)
		os.Exit(2)
	}
	client, err := NewClient(*url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	return &App{Addr: *addr, Client: client, periodMS: period.Milliseconds()}
}

// NewClient returns a client for the Redis at url with the settings of the
// example apps' client for -redis: go-redis's defaults from the URL, the
// context's deadline honoured, no retries, one dial attempt.
func NewClient(url string) (*redis.Client, error) {
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	opts.DialerRetries = 1
	return redis.NewClient(opts), nil
}

// Count runs the script once for the client at remoteAddr (host:port or a
// bare IP).
func (a *App) Count(ctx context.Context, remoteAddr string) error {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	return Script.Run(ctx, a.Client, []string{"bench-e2e:{ip:" + host + "}"}, a.periodMS).Err()
}

// HTTPServer returns an *http.Server for h with the example apps' timeouts.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// Serve listens on a.Addr and serves with serve until SIGINT or SIGTERM,
// then shuts down with shutdown and closes the client.
func (a *App) Serve(name string, serve func(net.Listener) error, shutdown func(context.Context) error) {
	ln, err := net.Listen("tcp", a.Addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%s baseline listening on http://%s\n", name, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	code := 0
	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "%s: serve: %v\n", name, err)
		code = 1
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := shutdown(sctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s: shutdown: %v\n", name, err)
			code = 1
		}
		cancel()
	}
	a.Client.Close()
	os.Exit(code)
}

// Fail answers a request whose script call failed: 500, which the
// benchmark counts as a failed request.
func Fail(w io.Writer, err error) {
	fmt.Fprintf(w, "script call failed: %v\n", err)
}
