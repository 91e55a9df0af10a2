// Command capacity measures what each ratekit algorithm costs Redis per
// decision, and plans from it: how many Redis Cluster masters serve 100k,
// 1M and 10M decisions/s, what one hot key's slot caps out at and how
// leasing lifts that cap, and what network a fleet of replicas needs.
//
// It starts its own redis-server on a free loopback port (and kills it by
// pid at the end). For each algorithm, unbatched, batched and, for GCRA,
// leasing, it runs goroutines calling store.AllowAllN on 100,000 keys and
// on one hot key; then the same load through the outbound reservation
// (outbound.Limiter.Reserve, without the wait) and through ratekit-server's
// gRPC path (the server built from this tree, run as a process against the
// same redis-server and stopped by its pid). Around each run it reads INFO
// commandstats, INFO stats and redis-server's CPU time from /proc. It
// reports medians over rounds, with their spread, and the arithmetic of
// every derived figure.
//
//	go run ./cmd/capacity -out ../docs/capacity.md   # from bench/; or bench/capacity.sh
//	go run ./cmd/capacity -quick -out /dev/null      # seconds; for CI
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

type options struct {
	rounds     int
	goroutines int
	decisions  int64
	maxRun     time.Duration
	manyKeys   int
	headroom   float64
	replicas   int
	quick      bool
	out        string
	cmdline    string
	note       string
	// serverBin is a ratekit-server binary for the server rows; empty:
	// built from this tree.
	serverBin string
}

func main() {
	o := defaultOptions()
	flag.IntVar(&o.rounds, "rounds", o.rounds, "rounds; every case runs once a round, figures are medians over them")
	flag.IntVar(&o.goroutines, "goroutines", o.goroutines, "goroutines calling the store in each run")
	flag.Int64Var(&o.decisions, "decisions", o.decisions, "decisions a run makes, unless -max-run passes first")
	flag.DurationVar(&o.maxRun, "max-run", o.maxRun, "longest run")
	flag.Float64Var(&o.headroom, "headroom", o.headroom, "share of a master's core to plan on (0.5: masters at 50% CPU)")
	flag.IntVar(&o.replicas, "replicas", o.replicas, "replicas of the fleet in the network and overshoot figures")
	flag.BoolVar(&o.quick, "quick", false, "one round of a few decisions per case: checks that everything works, in seconds")
	flag.StringVar(&o.out, "out", "", "write the markdown report to this file (default: standard output)")
	flag.StringVar(&o.cmdline, "cmdline", "", "command line to print in the report (default: this one)")
	flag.StringVar(&o.note, "note", "", "a note on the machine, printed in the report")
	flag.StringVar(&o.serverBin, "ratekit-server", "", "a ratekit-server binary to run for its rows (default: built from this tree)")
	flag.Parse()
	if o.cmdline == "" {
		o.cmdline = strings.TrimSpace("go run ./cmd/capacity " + strings.Join(os.Args[1:], " "))
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(1)
	}
}

func defaultOptions() options {
	return options{rounds: 3, goroutines: 64, decisions: 200_000, maxRun: 10 * time.Second,
		manyKeys: 100_000, headroom: 0.5, replicas: 100}
}

// check validates o and applies -quick.
func (o *options) check() error {
	if o.quick {
		o.rounds, o.goroutines, o.decisions = 1, min(o.goroutines, 8), 64
	}
	switch {
	case o.rounds < 1 || o.goroutines < 1 || o.decisions < 1 || o.maxRun <= 0:
		return errors.New("-rounds, -goroutines, -decisions and -max-run must be positive")
	case o.headroom <= 0 || o.headroom > 1:
		return errors.New("-headroom must be above 0 and at most 1")
	case o.replicas < 1:
		return errors.New("-replicas must be at least 1")
	}
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// run measures on a redis-server of its own and writes the report.
func run(ctx context.Context, o options) (err error) {
	rep := &report{opts: o, started: time.Now()}
	srv, err := redisproc.Start()
	if err != nil {
		return err
	}
	progress("redis-server pid %d on %s", srv.Pid(), srv.Addr)
	defer func() {
		if stopErr := srv.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	client := newClient(srv.Addr)
	defer client.Close()
	rep.redisVersion = redisproc.Version(ctx, client)
	rep.ioThreads = ioThreads(ctx, client)
	if rep.rows, err = measure(ctx, client, srv.Pid(), o); err != nil {
		return err
	}
	rep.finished = time.Now()
	return writeReport(o.out, rep)
}

// ioThreads returns the server's io-threads setting, or "unknown".
func ioThreads(ctx context.Context, client *redis.Client) string {
	v, err := client.ConfigGet(ctx, "io-threads").Result()
	if err != nil || v["io-threads"] == "" {
		return "unknown"
	}
	return v["io-threads"]
}

// newClient builds the client as README.md's quick start does, with a
// connection for each goroutine and more.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              256,
	})
}

// writeReport writes rep to path, or to standard output when path is
// empty.
func writeReport(path string, rep *report) (err error) {
	var w io.Writer = os.Stdout
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		w = f
	}
	return rep.write(w)
}
