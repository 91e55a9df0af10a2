// Command ratekit-server is a drop-in for envoyproxy/ratelimit: envoy's
// rate limit gRPC API and /json, its settings and its YAML files, answered
// as envoy answers them, with limits held exactly in Redis on Redis's
// clock, a deadline, a circuit breaker and a local fallback when Redis
// fails, and ratekit's algorithms (GCRA, sliding windows, several limits on
// one descriptor) through keys of its own. See docs/gateways-envoy.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/runtime"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/server"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(check(os.Args[2:], os.Stdout))
	}
	os.Exit(run())
}

// check loads the files of each directory given, as the server would
// (every file, subdirectories included), and says what is wrong with them:
// "ratekit-server check [-merge] [-ignore-dot-files] DIR...". It exits 0
// when every directory loads, 1 when one does not, 2 for bad arguments.
func check(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	merge := fs.Bool("merge", false, "let several files add to one domain (MERGE_DOMAIN_CONFIG)")
	dots := fs.Bool("ignore-dot-files", false, "skip dot files (RUNTIME_IGNOREDOTFILES)")
	alg := fs.String("algorithm", "compatible", "the algorithm of limits that name none (RATEKIT_ALGORITHM)")
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(out, "usage: ratekit-server check [-merge] [-ignore-dot-files] [-algorithm A] DIR...")
		return 2
	}
	a, err := config.ParseAlgorithm(*alg)
	if err != nil {
		fmt.Fprintln(out, err)
		return 2
	}
	code := 0
	for _, dir := range fs.Args() {
		files, err := runtime.Source{Root: dir, IgnoreDotFiles: *dots}.Read()
		if err != nil {
			fmt.Fprintf(out, "%s: %v\n", dir, err)
			code = 1
			continue
		}
		c, warns, err := config.Load(files, config.Options{DefaultAlgorithm: a, MergeDomains: *merge})
		for _, w := range warns {
			fmt.Fprintf(out, "warning: %v\n", w.Error())
		}
		if err != nil {
			fmt.Fprintln(out, err)
			code = 1
			continue
		}
		fmt.Fprintf(out, "%s: %d files, %d rate limits: ok\n", dir, len(c.Files()), c.Rules())
	}
	return code
}

// gcPercent is the garbage collector's target unless GOGC says otherwise:
// the server's heap is a few MiB of short-lived allocations, so four
// times as much garbage between collections costs little memory and
// saves CPU on every decision (measured with envoytest/cmd/speed: about a
// tenth more decisions per second at 64 concurrent calls).
const gcPercent = 400

func run() int {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	set, notes, err := settings.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ratekit-server: settings refused:\n%v\n", err)
		return 2
	}
	log := logger(set)
	for _, n := range notes {
		log.Warn("setting accepted, changes nothing", "setting", n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.NewContext(ctx, set, log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	select {
	case err := <-done:
		if err != nil {
			log.Error("server failed", "error", err.Error())
			srv.Close()
			return 1
		}
		return 0
	case <-ctx.Done():
	}
	log.Warn("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-done
	return 0
}

// logger logs as LOG_LEVEL and LOG_FORMAT say, to stderr.
func logger(set settings.Settings) *slog.Logger {
	level := slog.LevelWarn
	switch strings.ToLower(set.LogLevel) {
	case "trace", "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error", "fatal", "panic":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(set.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
