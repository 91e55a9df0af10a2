// Command compare measures ratekit's Redis algorithms against other Go rate
// limiters on Redis, and against two baselines through the same go-redis
// client: a one-line INCR+PEXPIRE script and a PING. Beside them it
// measures ratekit's outbound reservation (package outbound, one Reserve a
// decision, without the wait) and ratekit-server's gRPC path (the server
// built from this tree and run as a process, called with envoy's
// ShouldRateLimit, one descriptor a call).
//
// In one run it starts its own redis-server on a free loopback port (and
// kills it by pid at the end), and measures every contender at 1, 16, 64
// and 256 goroutines, on one hot key and on 100,000 keys, in interleaved
// rounds: within a round every contender runs once per case, in slices
// that the contenders take in turn, so that each ratio to the bare script
// compares runs that shared the machine's moments. It reports
// medians over the rounds. Then it checks, for every limiter, how many
// requests 4 processes sharing one key and a limit of 1000 per minute get
// through.
//
//	go run ./cmd/compare -rounds 3 -duration 1s -out ../docs/benchmarks.md
//	go run ./cmd/compare -quick -out /dev/null   # seconds; for CI
//
// The figures are only comparable within one run: on a shared machine take
// the ratios, not the absolute numbers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/mdsection"
	"github.com/ratekit/ratekit/bench/internal/redisproc"
	"github.com/ratekit/ratekit/bench/internal/serverproc"
)

var (
	goroutineCounts = []int{1, 16, 64, 256}
	// benchLimit is the limit of the throughput runs, per minute: far above
	// what any run reaches, so the allowing path is what is measured. It is
	// the fastest GCRA limit ratekit accepts, one unit per microsecond
	// (ratekit's sliding log runs at its own cap, core.MaxLogRate).
	benchLimit = 60_000_000
)

const manyKeys = 100_000

// quickExtra is how many decisions more than goroutines a run makes with
// -quick.
const quickExtra = 16

type options struct {
	rounds   int
	duration time.Duration
	quick    bool
	out      string
	cmdline  string
	note     string
	noExact  bool
	// keep names the file whose end-to-end section (bench/e2e.sh's) the
	// report carries over; empty: -out itself.
	keep string
	// latency, when above 0, adds a network pass through a proxy that
	// adds it each way, of at most latencyRounds rounds.
	latency       time.Duration
	latencyRounds int
	// only, when not empty, names the contenders to measure (the bare
	// script always among them), for a quick A/B of a few rows.
	only []string
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds; figures are medians over them")
	flag.DurationVar(&o.duration, "duration", time.Second, "target length of one contender's run on one case")
	flag.BoolVar(&o.quick, "quick", false, "tiny fixed counts instead of timed runs: checks that everything works, in seconds")
	flag.StringVar(&o.out, "out", "", "write the markdown report to this file (default: standard output)")
	flag.StringVar(&o.cmdline, "cmdline", "", "command line to print in the report (default: this one)")
	flag.StringVar(&o.note, "note", "", "a note on the machine, printed in the report")
	flag.BoolVar(&o.noExact, "no-exact", false, "skip the cross-process exactness check")
	flag.StringVar(&o.keep, "keep", "", "carry over the end-to-end section (written by bench/e2e.sh) of this file into the report (default: the -out file)")
	flag.DurationVar(&o.latency, "latency", 0, "also measure through an in-process proxy that adds this latency each way between the client and redis-server (such as 250us); 0: no network pass")
	flag.IntVar(&o.latencyRounds, "latency-rounds", defaultNetworkRounds, "rounds of the network pass at most (never more than -rounds)")
	flag.DurationVar(&limiterTimeout, "limiter-timeout", limiterTimeout, "the deadline of the Limiter, outbound and ratekit-server rows' Redis calls in the direct pass (the network pass uses 1s)")
	flag.StringVar(&serverBin, "ratekit-server", "", "a ratekit-server binary to run for its row (default: built from this tree once per run)")
	flag.Func("only", "measure only these contenders, separated by semicolons (the bare script always runs): for a quick A/B, not for the report", func(v string) error {
		for name := range strings.SplitSeq(v, ";") {
			if name = strings.TrimSpace(name); name != "" {
				o.only = append(o.only, name)
			}
		}
		return nil
	})
	var child childFlags
	child.register()
	cpuProfile := flag.String("cpuprofile", "", "write this process's CPU profile over the whole run to this file: for finding where a contender's time goes, not for the report")
	flag.Parse()

	if child.name != "" {
		err := runChild(child)
		if cerr := closeOpened(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare (child):", err)
			os.Exit(1)
		}
		return
	}
	if o.rounds < 1 || o.latencyRounds < 1 || o.latency < 0 {
		fmt.Fprintln(os.Stderr, "compare: -rounds and -latency-rounds must be at least 1, -latency at least 0")
		os.Exit(2)
	}
	if o.cmdline == "" {
		o.cmdline = strings.TrimSpace("go run ./cmd/compare " + strings.Join(os.Args[1:], " "))
	}
	if err := profiled(*cpuProfile, func() error { return compare(o) }); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// profiled runs f, under a CPU profile written to path unless path is
// empty.
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return err
	}
	err = f()
	pprof.StopCPUProfile()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// keyCase is one of the two key sets.
type keyCase struct {
	name  string
	count int
}

var keyCases = []keyCase{{"hot", 1}, {"100k", manyKeys}}

// benchCase is one (key set, goroutines) pair.
type benchCase struct {
	keys keyCase
	g    int
}

func (c benchCase) String() string { return fmt.Sprintf("%s g=%d", c.keys.name, c.g) }

func cases() []benchCase {
	var cs []benchCase
	for _, k := range keyCases {
		for _, g := range goroutineCounts {
			cs = append(cs, benchCase{k, g})
		}
	}
	return cs
}

// slug turns a contender's name into a key prefix.
func slug(name string) string {
	return strings.NewReplacer(" ", "-", "/", "-", "+", "-").Replace(strings.ToLower(name))
}

// keyFor returns the storage key of identity for contender c. Every
// contender has keys of its own, since each keeps its own kind of value.
// ratekit and the bare script get keys as a Limiter builds them, prefix +
// rule + ":{" + identity + "}"; the other libraries add their own prefixes
// to what they are given; ratekit-server, as it builds them (c.key).
func keyFor(c contender, identity string) (string, error) {
	if c.key != nil {
		return c.key(identity), nil
	}
	if c.kind == kindOther {
		return prefixOf(c.name) + identity, nil
	}
	return prefixOf(c.name) + ruleName + ":{" + identity + "}", nil
}

// prefixOf returns the prefix of the keys of contender name.
func prefixOf(name string) string { return "cmp-" + slug(name) + ":" }

// keySet holds distinct keys in one string, cut at ends: key i is
// all[ends[i-1]:ends[i]]. Holding no pointer per key, it gives the garbage
// collector nothing to mark, so a collection costs the same whatever the
// number of keys.
type keySet struct {
	all  string
	ends []int32
}

func (ks *keySet) len() int { return len(ks.ends) }

func (ks *keySet) key(i int) string {
	start := int32(0)
	if i > 0 {
		start = ks.ends[i-1]
	}
	return ks.all[start:ks.ends[i]]
}

// buildKeys returns count keys of c and checks that they are distinct.
func buildKeys(c contender, count int) (*keySet, error) {
	var all strings.Builder
	ends := make([]int32, count)
	for i := range ends {
		id := hotIdentity
		if count > 1 {
			id = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		}
		k, err := keyFor(c, id)
		if err != nil {
			return nil, err
		}
		all.WriteString(k)
		ends[i] = int32(all.Len())
	}
	ks := &keySet{all: all.String(), ends: ends}
	seen := make(map[string]struct{}, count)
	for i := range count {
		seen[ks.key(i)] = struct{}{}
	}
	if len(seen) != count {
		return nil, fmt.Errorf("fixture: %s: %d distinct keys, want %d", c.name, len(seen), count)
	}
	return ks, nil
}

// singleKey returns a set of one key.
func singleKey(k string) *keySet { return &keySet{all: k, ends: []int32{int32(len(k))}} }

// newClient returns the client every contender shares, built as README.md's
// quick start builds it, with a connection for each goroutine.
func newClient(addr string, poolSize int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, PoolSize: poolSize,
		ContextTimeoutEnabled: true, // the Limiter's deadline frees the connection
		MaxRetries:            -1,   // no retry within a deadline of milliseconds
	})
}

func compare(o options) (err error) {
	started := time.Now()
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
	defer serverproc.Cleanup()
	// the contenders' Limiters and server processes, on every way out,
	// before redis-server stops
	defer func() {
		if cerr := closeOpened(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ctx := context.Background()
	// one client for every contender, with a connection for each goroutine
	client := newClient(srv.Addr, 256)
	defer client.Close()

	rep := &report{opts: o, started: started, cases: cases()}
	// Read the section to carry over before anything is measured, so that
	// a file that cannot be read fails the run at once.
	keep := o.keep
	if keep == "" && o.out != "" {
		keep = o.out
	}
	if keep != "" {
		if rep.e2e, _, err = mdsection.FromFile(keep); err != nil {
			return fmt.Errorf("reading the end-to-end section to keep: %w", err)
		}
	}
	rep.redisVersion = redisproc.Version(ctx, client)

	cs, err := pick(contenders(), o.only)
	if err != nil {
		return err
	}
	if err := selfCheck(ctx, client, cs); err != nil {
		return err
	}
	progress("self-check passed: every limiter admits 3 of 5 calls under a limit of 3")
	// the self-check's Limiters and servers (under a limit of 3) go
	if err := closeOpened(); err != nil {
		return err
	}

	// a client of its own for reading the server's counters, direct in
	// both passes
	sampler := newClient(srv.Addr, 1)
	defer sampler.Close()
	m := &meter{client: sampler, pid: srv.Pid()}
	bench, err := measure(ctx, client, cs, o, m)
	if err != nil {
		return err
	}
	rep.bench = bench
	if o.latency > 0 {
		if rep.network, err = networkPass(ctx, srv.Addr, cs, o, m); err != nil {
			return err
		}
	}

	if !o.noExact {
		if err := client.FlushAll(ctx).Err(); err != nil {
			return err
		}
		ex, err := exactness(ctx, srv.Addr, client, cs, o.quick)
		if err != nil {
			return err
		}
		rep.exact = ex
	}
	rep.finished = time.Now()

	if err := writeReport(rep, o.out); err != nil {
		return err
	}
	progress("done in %v", time.Since(started).Round(time.Second))
	return rep.failure()
}

// pick returns the contenders of cs named in only, and the bare script, in
// cs's order; all of cs when only is empty.
func pick(cs []contender, only []string) ([]contender, error) {
	if len(only) == 0 {
		return cs, nil
	}
	for _, name := range only {
		if !slices.ContainsFunc(cs, func(c contender) bool { return c.name == name }) {
			return nil, fmt.Errorf("-only: no contender named %q", name)
		}
	}
	var out []contender
	for _, c := range cs {
		if c.name == bareName || slices.Contains(only, c.name) {
			out = append(out, c)
		}
	}
	return out, nil
}

// writeReport writes rep to the file out, or to standard output when out
// is empty.
func writeReport(rep *report, out string) (err error) {
	if out == "" {
		return rep.write(os.Stdout)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return rep.write(f)
}

// checkKeyWritten verifies that ratekit's contender c wrote its state
// under key (or, for an algorithm of several keys, keys that begin with
// it), so that every ratekit row, whether it calls a store or a Limiter,
// works on keys as a Limiter builds them.
func checkKeyWritten(ctx context.Context, client *redis.Client, c contender, key string) error {
	if c.kind != kindRatekit {
		return nil
	}
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if strings.HasPrefix(k, key) {
				return nil
			}
		}
		if cursor = next; cursor == 0 {
			return fmt.Errorf("fixture: %s wrote no key %q", c.name, key)
		}
	}
}

// selfCheck verifies that each limiter is wired the right way round: under a
// limit of 3 per minute, 5 calls in a row on a fresh key make 3 allowed and
// 2 denied decisions, as the harness counts them (2 and 3 for charges,
// each answered after it spent).
func selfCheck(ctx context.Context, client *redis.Client, cs []contender) error {
	for _, c := range cs {
		open, err := c.open(ctx, client, 3)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		key, err := keyFor(c, checkIdentity)
		if err != nil {
			return err
		}
		r := run(open, singleKey(key), 0, 1, 5, nil, nil)
		if err := r.check(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if err := checkKeyWritten(ctx, client, c, key); err != nil {
			return err
		}
		want := runResult{allowed: 3, denied: 2}
		switch {
		case c.kind == kindBaseline:
			want = runResult{allowed: 5}
		case c.charges:
			want = runResult{allowed: 2, denied: 3}
		}
		if r.errors > 0 || r.allowed != want.allowed || r.denied != want.denied {
			return fmt.Errorf("fixture: %s under a limit of 3: %d allowed, %d denied, %d errors (%v); want %d allowed, %d denied",
				c.name, r.allowed, r.denied, r.errors, r.firstErr, want.allowed, want.denied)
		}
	}
	return nil
}
