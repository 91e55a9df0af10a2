// Command grpc is the ratekit example app for gRPC: a small Greeter service
// behind the interceptors of package grpclimit.
//
//	go run ./examples/grpc                          # embedded miniredis
//	go run ./examples/grpc -redis localhost:6379    # a Redis server
//
// It takes the flags of the HTTP example apps, with their environment
// variables, and serves their routes as methods of ratekit.example.Greeter
// (see greeter.go): SayHello is limited by the default rule (-limit per
// -period and client), SayHelloStrict also by the strict rule
// (-strict-limit), and the server stream Countdown by the default rule,
// once per stream. The health service (grpc.health.v1.Health) and server
// reflection are never limited. In -key apikey and -key jwt modes the key
// is read from the metadata keys x-api-key and authorization. With -metrics
// (METRICS=1), Prometheus metrics are served over HTTP at /metrics on an
// address of their own, -metrics-addr (METRICS_ADDR, default
// 127.0.0.1:9464). The rules are named as in the HTTP apps, so a fleet that
// mixes them behind one Redis shares one limit.
//
// Try it with grpcurl, which finds the service through reflection:
//
//	grpcurl -plaintext 127.0.0.1:8080 ratekit.example.Greeter/SayHelloStrict
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ratekit/ratekit/examples/internal/app"
)

const name = "grpc"

// The one flag this app has beyond the HTTP apps' own.
const (
	metricsAddrFlag    = "metrics-addr"
	metricsAddrEnv     = "METRICS_ADDR"
	defaultMetricsAddr = "127.0.0.1:9464"
)

// help follows the HTTP apps' usage when the app runs with -h.
const help = `
This is the gRPC app: read the routes above as methods of ratekit.example.Greeter,
GET / as SayHello (and the server stream Countdown), GET /strict as SayHelloStrict,
GET /healthz as the health service grpc.health.v1.Health; the X-API-Key and
Authorization headers as the metadata keys x-api-key and authorization; 429 as
ResourceExhausted and 503 as Unavailable. It adds one flag:
  -metrics-addr address
    	where -metrics serves /metrics over HTTP (default "` + defaultMetricsAddr + `"); env ` + metricsAddrEnv + `
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the app with args and the environment of getenv, logging to
// stderr, until ctx ends, and returns the exit status: 0 after a graceful
// shutdown or for -h, 2 for a bad flag or environment value, 1 when the app
// cannot start or stops by itself.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, metricsAddr, err := parse(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, help)
			return 0
		}
		return 2
	}
	log := app.NewLogger(stderr)
	s, err := start(cfg, metricsAddr, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	return s.serve(ctx, cfg, log)
}

// parse reads the configuration: the HTTP apps' flags (app.Parse), and
// -metrics-addr. It reports a bad setting on stderr, once, and returns an
// error for it.
func parse(args []string, getenv func(string) string, stderr io.Writer) (app.Config, string, error) {
	args, metricsAddr, err := takeMetricsAddr(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nRun %s -h to see every flag.\n", name, err, name)
		return app.Config{}, "", err
	}
	out := &countingWriter{w: stderr}
	cfg, err := app.Parse(name, args, getenv, out)
	if err != nil && !errors.Is(err, flag.ErrHelp) && out.n == 0 { // not printed with the usage
		fmt.Fprintf(stderr, "%s: %v\nRun %s -h to see every flag.\n", name, err, name)
	}
	return cfg, metricsAddr, err
}

// takeMetricsAddr takes -metrics-addr out of args, which app.Parse does not
// know, and returns the other arguments and the address: the flag's value,
// else that of METRICS_ADDR, else the default.
func takeMetricsAddr(args []string, getenv func(string) string) ([]string, string, error) {
	addr := cmp.Or(getenv(metricsAddrEnv), defaultMetricsAddr)
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		flagName, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flagName != metricsAddrFlag {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, "", errors.New("-metrics-addr needs a value, such as 127.0.0.1:9464")
			}
			i++
			value = args[i]
		}
		addr = value
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, "", fmt.Errorf("-metrics-addr (METRICS_ADDR) is %q: want host:port, such as %s", addr, defaultMetricsAddr)
	}
	return rest, addr, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
