//go:build linux

// Command speed drives envoyproxy/ratelimit and ratekit-server over gRPC
// from one client, in alternating rounds, on one machine: 100,000
// distinct descriptors, and one hot descriptor, at 1, 16, 64 and 256
// concurrent calls. It reports decisions per second and their ratio, the
// client's p99, the server's allocations and CPU per decision, and
// Redis's commands and CPU per decision (INFO commandstats and cpu), each
// server on a redis-server of its own. With -tls on, both servers serve
// gRPC over TLS (GRPC_SERVER_USE_TLS, a certificate made here); with
// -tls both, the table without TLS and then the one with it, from one
// run. Run by hand, on a quiet machine:
//
//	cd cmd/ratekit-server/envoytest && go run ./cmd/speed -tls both -out ../../../docs/benchmarks-server.md
//
// With -before, a ratekit-server binary built from other code (an
// earlier commit) runs as a third server in the same alternating rounds,
// and each cell also gives this code's ratio to envoy divided by that
// binary's, which is how a change is held to the code before it:
//
//	git worktree add /tmp/before <commit> && go -C /tmp/before/cmd/ratekit-server build -o /tmp/ratekit-before .
//	go run ./cmd/speed -c 1,64 -rounds 9 -d 2s -before /tmp/ratekit-before
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratekit/ratekit/cmd/ratekit-server/envoytest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/certtest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
)

const config = `domain: bench
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
`

const distinct = 100_000

// options are the command's flags.
type options struct {
	rounds, conns int
	dur           time.Duration
	levels, out   string
	only, before  string
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "alternating rounds per cell")
	flag.DurationVar(&o.dur, "d", 3*time.Second, "length of one server's turn in a round")
	flag.StringVar(&o.levels, "c", "1,16,64,256", "concurrent calls")
	flag.IntVar(&o.conns, "conns", 8, "gRPC connections per server")
	flag.StringVar(&o.out, "out", "", "markdown file whose marked sections get the tables (stdout when empty)")
	flag.StringVar(&o.only, "only", "", "drive only this server (envoy, ratekit or before), to profile it")
	flag.StringVar(&o.before, "before", "", "a ratekit-server binary of other code to drive beside both, as the server before")
	mode := flag.String("tls", "off", "gRPC over TLS: off, on, or both (off, then on)")
	flag.Parse()
	modes, ok := map[string][]bool{"off": {false}, "on": {true}, "both": {false, true}}[*mode]
	if !ok {
		log.Fatalf("-tls=%s: off, on or both", *mode)
	}
	dir, err := os.MkdirTemp("", "speed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bins, err := envoytest.Build(dir)
	if err != nil {
		log.Fatal(err)
	}
	if o.before != "" {
		if o.before, err = filepath.Abs(o.before); err != nil {
			log.Fatal(err)
		}
		if _, err := os.Stat(o.before); err != nil {
			log.Fatalf("-before: %v", err)
		}
	}
	proctest.WriteConfigDir(filepath.Join(dir, "rt"), map[string]string{"bench.yaml": config})
	for _, on := range modes {
		if err := runMode(dir, bins, o, on); err != nil {
			log.Fatal(err)
		}
	}
}

// runMode starts both servers, with gRPC over TLS when tlsOn, measures
// them and writes the table, then stops them.
func runMode(dir string, built envoytest.Binaries, o options, tlsOn bool) error {
	var undo cleanup
	defer undo.run()
	env, creds := map[string]string{}, insecure.NewCredentials()
	if tlsOn {
		env, creds = serverTLS(filepath.Join(dir, "tls"))
	}
	names := []string{"envoy", "ratekit"}
	bins := binaries{Binaries: built, Before: o.before}
	if o.before != "" {
		names = append(names, "before")
	}
	servers := map[string]*side{}
	for _, name := range names {
		servers[name] = startSide(dir, name, bins, o.conns, env, creds, &undo)
	}
	cells := measure(servers, names, o.levels, o.rounds, o.dur, o.only)
	if o.only != "" {
		return nil
	}
	table := render(cells, names, o.rounds, o.dur, tlsOn)
	if o.out == "" {
		fmt.Print(table)
		return nil
	}
	return writeSection(o.out, sectionOf(tlsOn), table)
}

// serverTLS makes a CA and a certificate for 127.0.0.1 in dir, and
// returns the settings that serve gRPC with it and the clients'
// credentials that trust it.
func serverTLS(dir string) (map[string]string, credentials.TransportCredentials) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	ca := certtest.NewCA(fatal{}, "speed")
	_, cert, key := certtest.Files(fatal{}, dir, ca, "127.0.0.1")
	env := map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": cert, "GRPC_SERVER_TLS_KEY": key}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return env, credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}

// fatal is certtest.TB for a command: a failure ends it.
type fatal struct{}

func (fatal) Helper()           {}
func (fatal) Fatal(args ...any) { log.Fatal(args...) }

// cleanup is what main undoes on its way out, the last added first.
type cleanup []func()

func (c *cleanup) add(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// startSide starts server name (envoy or ratekit) on a redis-server of its
// own, with conns gRPC clients, and adds to undo what stops them.
func startSide(dir, name string, bins binaries, conns int, tlsEnv map[string]string, creds credentials.TransportCredentials, undo *cleanup) *side {
	rs, err := startRedis(dir, name)
	if err != nil {
		log.Fatal(err)
	}
	undo.add(func() { _ = rs.Process.Kill() })
	bin := bins.Envoy
	env := proctest.RuntimeEnv(filepath.Join(dir, "rt"))
	env["REDIS_URL"] = rs.addr
	for k, v := range tlsEnv {
		env[k] = v
	}
	if name != "envoy" {
		bin = bins.Ratekit
		if name == "before" {
			bin = bins.Before
		}
		// every decision on Redis, as envoy's: a call past the default
		// 50 ms deadline would be decided locally, which costs less
		env["RATEKIT_TIMEOUT"] = "1s"
	}
	p, err := proctest.Start(name, bin, env)
	if err != nil {
		log.Fatal(err)
	}
	undo.add(p.Stop)
	s := &side{name: name, proc: p, redis: rs.addr}
	for range conns {
		c, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(creds))
		if err != nil {
			log.Fatal(err)
		}
		undo.add(func() { _ = c.Close() })
		s.clients = append(s.clients, rlspb.NewRateLimitServiceClient(c))
	}
	return s
}

// binaries are the servers' programs: envoy's, this code's, and the one
// before it when -before names one.
type binaries struct {
	envoytest.Binaries
	Before string
}

// measure runs every cell, at each number of concurrent calls in levels
// (comma-separated) over distinct descriptors and over one hot one: rounds
// of d per server of names, which take turns going first; with only, that
// server alone.
func measure(servers map[string]*side, names []string, levels string, rounds int, d time.Duration, only string) []cell {
	var cells []cell
	for _, lv := range strings.Split(levels, ",") {
		c, _ := strconv.Atoi(lv)
		for _, hot := range []bool{false, true} {
			cl := cell{conc: c, hot: hot, res: map[string]*result{}}
			for _, name := range names {
				cl.res[name] = &result{}
			}
			for r := range rounds {
				// round r starts with server r mod n, and runs backwards on
				// odd rounds, so that each server follows each other as often
				order := make([]string, len(names))
				for i := range names {
					order[i] = names[(r+i)%len(names)]
				}
				if r%2 == 1 {
					slices.Reverse(order)
				}
				for _, name := range order {
					if only == "" || only == name {
						servers[name].run(c, hot, d, cl.res[name])
					}
				}
			}
			cells = append(cells, cl)
			fmt.Fprintln(os.Stderr, cl.line())
		}
	}
	return cells
}

type side struct {
	name    string
	proc    *proctest.Proc
	redis   string
	clients []rlspb.RateLimitServiceClient
}

// result sums one server's runs of one cell.
type result struct {
	decisions, errors    int64
	secs                 float64
	lat                  []time.Duration
	mallocs, cpuNS       float64 // the server's
	redisCalls, redisCPU float64
}

type cell struct {
	conc int
	hot  bool
	res  map[string]*result
}

var seq atomic.Int64

// requests are built once, so that the client spends its time calling:
// proto messages are safe to marshal concurrently.
var requests, hotRequest = func() ([]*rlspb.RateLimitRequest, *rlspb.RateLimitRequest) {
	mk := func(v string) *rlspb.RateLimitRequest {
		return &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: v}}}}}
	}
	rs := make([]*rlspb.RateLimitRequest, distinct)
	for i := range rs {
		rs[i] = mk(strconv.Itoa(i))
	}
	return rs, mk("hot")
}()

// run drives s with c concurrent callers for d and adds what it measured
// to res.
func (s *side) run(c int, hot bool, d time.Duration, res *result) {
	m0, cpu0 := mallocs(s.proc.Debug), procCPU(s.proc.Pid())
	calls0, rcpu0 := redisInfo(s.redis)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n, e atomic.Int64
	)
	stop := time.Now().Add(d)
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := s.clients[w%len(s.clients)]
			lat := make([]time.Duration, 0, 1024)
			ctx, cancel := context.WithDeadline(context.Background(), stop.Add(5*time.Second))
			defer cancel()
			for t0 := time.Now(); t0.Before(stop); {
				req := hotRequest
				if !hot {
					req = requests[seq.Add(1)%distinct]
				}
				_, err := client.ShouldRateLimit(ctx, req)
				t1 := time.Now()
				lat = append(lat, t1.Sub(t0))
				t0 = t1
				if err != nil {
					e.Add(1)
				} else {
					n.Add(1)
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	calls1, rcpu1 := redisInfo(s.redis)
	res.decisions += n.Load()
	res.errors += e.Load()
	res.secs += secs
	res.mallocs += mallocs(s.proc.Debug) - m0
	res.cpuNS += procCPU(s.proc.Pid()) - cpu0
	res.redisCalls += calls1 - calls0
	res.redisCPU += rcpu1 - rcpu0
}

func (r *result) rate() float64 { return float64(r.decisions) / r.secs }

func (r *result) p99() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	return r.lat[len(r.lat)*99/100]
}

func (r *result) per(x float64) float64 { return x / float64(max(r.decisions, 1)) }

func (c cell) name() string {
	if c.hot {
		return fmt.Sprintf("%d, one hot descriptor", c.conc)
	}
	return fmt.Sprintf("%d, 100k descriptors", c.conc)
}

func (c cell) line() string {
	e, r := c.res["envoy"], c.res["ratekit"]
	l := fmt.Sprintf("%-26s envoy %8.0f/s p99 %-8v | ratekit %8.0f/s p99 %-8v | %.2fx", c.name(), e.rate(), e.p99().Round(10*time.Microsecond), r.rate(), r.p99().Round(10*time.Microsecond), r.rate()/e.rate())
	if b := c.res["before"]; b != nil {
		l += fmt.Sprintf(" | before %8.0f/s %.2fx | after ÷ before %.2f", b.rate(), b.rate()/e.rate(), r.rate()/b.rate())
	}
	return l
}

func render(cells []cell, names []string, rounds int, d time.Duration, tlsOn bool) string {
	var b strings.Builder
	over := ""
	if tlsOn {
		over = ", TLS on both (GRPC_SERVER_USE_TLS=true: an ECDSA P-256 certificate, TLS 1.3)"
	}
	fmt.Fprintf(&b, "Each cell: %d alternating rounds of %v per server, one client process driving both over gRPC (8 connections each)%s, one redis-server per server, on this machine (%s).\n\n", rounds, d, over, cpuModel())
	b.WriteString("| concurrent calls | server | decisions/s | ratio | p99 | allocs/decision | server CPU µs/decision | Redis calls/decision | Redis CPU µs/decision | errors |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		e := c.res["envoy"]
		for _, name := range names {
			r := c.res[name]
			ratio := "1.00"
			if name != "envoy" {
				ratio = fmt.Sprintf("**%.2f×**", r.rate()/e.rate())
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %v | %.1f | %.1f | %.2f | %.1f | %d |\n",
				c.name(), name, r.rate(), ratio, r.p99().Round(10*time.Microsecond), r.per(r.mallocs),
				r.per(r.cpuNS)/1e3, r.per(r.redisCalls), r.per(r.redisCPU)*1e6, r.errors)
		}
	}
	return b.String()
}

// mallocs reads the server's count of heap allocations from its debug
// port (runtime.MemStats in the heap profile's text form).
func mallocs(debug string) float64 {
	_, body, err := proctest.Get(debug, "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, "# Mallocs = "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// procCPU is the process's user and system CPU time in ns.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) * 1e9 / 100 // USER_HZ
}

// redisInfo returns Redis's total command calls (INFO commandstats, a
// script's inner commands included) and its CPU seconds.
func redisInfo(addr string) (calls, cpu float64) {
	out, err := exec.Command("redis-cli", "-h", host(addr), "-p", port(addr), "INFO", "all").Output()
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "cmdstat_") && !strings.HasPrefix(l, "cmdstat_info"):
			_, rest, _ := strings.Cut(l, "calls=")
			v, _, _ := strings.Cut(rest, ",")
			f, _ := strconv.ParseFloat(v, 64)
			calls += f
		case strings.HasPrefix(l, "used_cpu_sys:"), strings.HasPrefix(l, "used_cpu_user:"):
			_, v, _ := strings.Cut(l, ":")
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	return calls, cpu
}

func host(a string) string { h, _, _ := net.SplitHostPort(a); return h }
func port(a string) string { _, p, _ := net.SplitHostPort(a); return p }

type redisProc struct {
	*os.Process
	addr string
}

func startRedis(dir, name string) (*redisProc, error) {
	addr, err := proctest.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	// killed with this program, however it ends, as the servers are
	// (proctest.Start): a redis-server left behind would hold its port
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &redisProc{cmd.Process, addr}, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("redis-server for %s did not start", name)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":")) + fmt.Sprintf(", %d CPUs", numCPU())
		}
	}
	return "unknown CPU"
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// sectionOf is the name of the marked section of a table: speed, or
// speed-tls.
func sectionOf(tlsOn bool) string {
	if tlsOn {
		return "speed-tls"
	}
	return "speed"
}

// writeSection replaces the section of path marked <!-- name:begin -->
// ... <!-- name:end --> with table.
func writeSection(path, name, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+"\n"+table+s[j:]), 0o644)
}
