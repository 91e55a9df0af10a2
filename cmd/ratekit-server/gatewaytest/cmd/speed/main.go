//go:build linux

// Command speed measures Debian's nginx and Caddy, and Traefik built from
// its module, with and without ratekit-server's forward auth, and nginx's
// own limiter, on one machine: one redis-server, two ratekit-server
// replicas, a Go upstream, and every gateway in the configuration
// docs/benchmarks-gateways.md and the gateway guides hold (read from
// them). wrk drives each gateway in turn,
// in alternating rounds, at 64 connections for a bounded time; the table
// gives requests per second and wrk's p99 as ratios to the gateway alone.
// It then measures what nginx's limit_req gets wrong across instances, and
// writes both tables into the marked section of -out. Run by hand:
//
//	cd cmd/ratekit-server/gatewaytest && go run ./cmd/speed -rounds 7 -d 6s -out ../../../docs/benchmarks-gateways.md
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/gatewaytest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
)

func main() {
	var (
		rounds  = flag.Int("rounds", 7, "alternating rounds")
		dur     = flag.Duration("d", 6*time.Second, "wrk's duration per row and round")
		conns   = flag.Int("c", 64, "wrk's connections")
		threads = flag.Int("t", 2, "wrk's threads")
		out     = flag.String("out", "", "markdown file whose marked section gets the tables (stdout when empty)")
	)
	flag.Parse()
	if _, err := exec.LookPath("wrk"); err != nil {
		log.Fatal("wrk is not installed (apt-get install wrk)")
	}
	dir, err := os.MkdirTemp("", "gateway-speed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b := &bench{dir: dir}
	defer b.stop()
	if err := b.setup(); err != nil {
		b.stop()
		log.Fatal(err)
	}
	runs := map[string][]wrkResult{}
	for r := range *rounds {
		for _, row := range rows {
			before, start := b.cpu(row.gateway), time.Now()
			res, err := runWrk(b.gateways[row.gateway]+row.path, *threads, *conns, *dur)
			res.cpu = b.cpu(row.gateway).sub(before)
			res.closed = b.closedChecks(start)
			if err != nil {
				b.stop()
				log.Fatalf("%s: %v", row.name, err)
			}
			log.Printf("round %d, %s: %.0f requests/s, p99 %v, %d not 2xx", r+1, row.name, res.rps, res.p99, res.non2xx)
			runs[row.name] = append(runs[row.name], res)
		}
	}
	exact, err := b.exactness()
	if err != nil {
		b.stop()
		log.Fatal(err)
	}
	text := report(runs, exact, *rounds, *dur, *conns, *threads)
	if *out == "" {
		fmt.Print(text)
		return
	}
	if err := writeSection(*out, text); err != nil {
		b.stop()
		log.Fatal(err)
	}
}

// row is one line of the speed table: wrk against a gateway's path,
// compared with base, the gateway alone, in the same round.
type row struct {
	name, gateway, path, base string
}

var rows = []row{
	{"nginx", "nginx", "/", "nginx"},
	{"nginx `limit_req`", "nginx limit_req", "/", "nginx"},
	{"nginx + ratekit-server", "nginx + ratekit", "/", "nginx"},
	{"nginx + ratekit-server, every request denied (`/login`)", "nginx + ratekit", "/login", "nginx"},
	{"nginx + ratekit-server, checks by GET, every request denied (`/login`)", "nginx + ratekit GET", "/login", "nginx"},
	{"caddy", "caddy", "/", "caddy"},
	{"caddy + ratekit-server", "caddy + ratekit", "/", "caddy"},
	{"caddy + ratekit-server, every request denied (`/login`)", "caddy + ratekit", "/login", "caddy"},
	{"traefik", "traefik", "/", "traefik"},
	{"traefik + ratekit-server", "traefik + ratekit", "/", "traefik"},
	{"traefik + ratekit-server, every request denied (`/login`)", "traefik + ratekit", "/login", "traefik"},
}

type bench struct {
	dir      string
	procs    []interface{ Stop() }
	app      *gatewaytest.Upstream
	replicas []*proctest.Proc
	gateways map[string]string // name → address
	pids     map[string]int    // gateway name → pid
	redisPid int
	limitReq []string // limit_req nginx instances at the guide's limit
	guideGW  []string // the guide's nginx, twice
}

func (b *bench) stop() {
	for i := len(b.procs) - 1; i >= 0; i-- {
		b.procs[i].Stop()
	}
	b.procs = nil
	if b.app != nil {
		b.app.Close()
		b.app = nil
	}
}

func block(doc, name string) string {
	text, err := gatewaytest.Guide(doc)
	if err != nil {
		log.Fatal(err)
	}
	s, err := gatewaytest.Block(text, name)
	if err != nil {
		log.Fatalf("%s: %v", doc, err)
	}
	return s
}

func subst(s string, pairs ...string) string {
	out, err := gatewaytest.Substitute(s, pairs...)
	if err != nil {
		log.Fatal(err)
	}
	return out
}

// setup starts every process the rows and the exactness runs need:
// redis-server, the ratekit-server replicas, the upstream, and the
// gateways.
func (b *bench) setup() error {
	bin, err := gatewaytest.BuildServer(b.dir, false)
	if err != nil {
		return err
	}
	if err := b.startRatekit(bin); err != nil {
		return err
	}
	b.app = gatewaytest.NewUpstream(false)
	app := b.app.Addr()
	b.gateways, b.pids = map[string]string{}, map[string]int{}
	if err := b.startNginxes(app); err != nil {
		return err
	}
	if err := b.startCaddies(app); err != nil {
		return err
	}
	return b.startTraefiks(app)
}

// startRatekit starts redis-server and two ratekit-server replicas over
// it, with the configuration docs/benchmarks-gateways.md holds.
func (b *bench) startRatekit(bin string) error {
	rs, err := gatewaytest.StartRedis(b.dir)
	if err != nil {
		return err
	}
	b.procs = append(b.procs, rs)
	b.redisPid = rs.Pid()
	rt := filepath.Join(b.dir, "rt")
	if err := proctest.WriteConfigDir(rt, map[string]string{"edge.yaml": block("benchmarks-gateways.md", "bench-ratekit")}); err != nil {
		return err
	}
	env := proctest.RuntimeEnv(rt)
	env["REDIS_URL"] = rs.Addr
	env["RATEKIT_REPLICAS"] = "2"
	// every decision on Redis: with the default 50 ms deadline, calls that
	// wait longer on this loaded machine would go to the local fallback
	env["RATEKIT_TIMEOUT"] = "1s"
	for _, name := range []string{"ratekit-a", "ratekit-b"} {
		p, err := proctest.Start(name, bin, env)
		if err != nil {
			return err
		}
		b.procs = append(b.procs, p)
		b.replicas = append(b.replicas, p)
	}
	return nil
}

// startNginxes starts the nginx gateways in front of upstream app: those
// of the rows, the three limit_req ones and the guide's two.
func (b *bench) startNginxes(app string) error {
	guide := subst(block("gateways-nginx.md", "nginx"),
		"server ratekit-a:8080;", "server "+b.replicas[0].HTTP+";",
		"server ratekit-b:8080;", "server "+b.replicas[1].HTTP+";")
	check := map[string]string{"snippets/ratekit-check.conf": block("gateways-nginx.md", "nginx-check")}
	limitReq := block("benchmarks-gateways.md", "nginx-limit-req")
	for _, g := range []struct {
		name, site string
		extra      map[string]string
	}{
		{"nginx", block("benchmarks-gateways.md", "nginx-alone"), nil},
		{"nginx limit_req", subst(limitReq, "rate=10r/m", "rate=1000000000r/s", "burst=9", "burst=1000000000"), nil},
		{"nginx + ratekit", guide, check},
		// the guide's, its checks sent by GET: what proxy_method HEAD spares
		{"nginx + ratekit GET", guide, map[string]string{"snippets/ratekit-check.conf": subst(check["snippets/ratekit-check.conf"], "proxy_method HEAD;", "")}},
	} {
		var err error
		if b.gateways[g.name], err = b.nginx(g.name, g.site, app, g.extra); err != nil {
			return err
		}
	}
	for i := range 3 {
		addr, err := b.nginx(fmt.Sprintf("limit_req %d", i+1), limitReq, app, nil)
		if err != nil {
			return err
		}
		b.limitReq = append(b.limitReq, addr)
	}
	for i := range 2 {
		addr, err := b.nginx(fmt.Sprintf("guide %d", i+1), guide, app, check)
		if err != nil {
			return err
		}
		b.guideGW = append(b.guideGW, addr)
	}
	return nil
}

// nginx starts an nginx named name with site, its upstream app, and the
// extra files, and returns its address.
func (b *bench) nginx(name, site, app string, extra map[string]string) (string, error) {
	addr, err := gatewaytest.FreePort()
	if err != nil {
		return "", err
	}
	files := map[string]string{"site.conf": subst(site, "listen 8000;", "listen "+addr+";", "server app:9000;", "server "+app+";")}
	for k, v := range extra {
		files[k] = v
	}
	p, err := gatewaytest.StartNginx(b.dir, strings.ReplaceAll(name, " ", "-"), addr, files, 2)
	if err != nil {
		return "", err
	}
	b.procs = append(b.procs, p)
	b.pids[name] = p.Pid()
	return addr, nil
}

// startCaddies starts the Caddy gateways of the rows in front of upstream
// app: Caddy alone, and the forward auth guide's.
func (b *bench) startCaddies(app string) error {
	var err error
	if b.gateways["caddy"], err = b.caddy("caddy", block("benchmarks-gateways.md", "caddy-alone"), app); err != nil {
		return err
	}
	cf := subst(block("gateways-caddy-forward-auth.md", "caddy"), "ratekit-a:8080 ratekit-b:8080", b.replicas[0].HTTP+" "+b.replicas[1].HTTP)
	b.gateways["caddy + ratekit"], err = b.caddy("caddy + ratekit", cf, app)
	return err
}

// caddy starts a Caddy named name with Caddyfile cf, its upstream app,
// and returns its address.
func (b *bench) caddy(name, cf, app string) (string, error) {
	// Caddy binds with SO_REUSEPORT: the two must differ
	addrs, err := proctest.FreePorts(2)
	if err != nil {
		return "", fmt.Errorf("no free port: %w", err)
	}
	addr, admin := addrs[0], addrs[1]
	cf = subst(cf, "admin localhost:2019", "admin "+admin, "http://:8000", "http://"+addr, "app:9000", app)
	p, err := gatewaytest.StartCaddy(b.dir, strings.ReplaceAll(name, " ", "-"), addr, cf)
	if err != nil {
		return "", err
	}
	b.procs = append(b.procs, p)
	b.pids[name] = p.Pid()
	return addr, nil
}

// startTraefiks starts the Traefik gateways of the rows in front of
// upstream app, built from Traefik's module (gatewaytest.TraefikBinary):
// Traefik alone, and the guide's, whose forwardAuth asks the first
// replica: its one address stands for the replicas' Service, whose
// balancing (kube-proxy's, in the kernel) a proxy of this program's would
// not measure.
func (b *bench) startTraefiks(app string) error {
	bin, err := gatewaytest.TraefikBinary()
	if err != nil {
		return err
	}
	guide := subst(block("gateways-traefik.md", "traefik"), "http://ratekit:8080/", "http://"+b.replicas[0].HTTP+"/")
	for _, g := range []struct{ name, dynamic, ready string }{
		{"traefik", block("benchmarks-gateways.md", "traefik-alone"), "/"},
		{"traefik + ratekit", guide, "/healthz"},
	} {
		addr, err := gatewaytest.FreePort()
		if err != nil {
			return err
		}
		static := subst(block("gateways-traefik.md", "traefik-static"), `address: ":8000"`, `address: "`+addr+`"`)
		p, err := gatewaytest.StartTraefik(bin, b.dir, strings.ReplaceAll(g.name, " ", "-"), addr, static, subst(g.dynamic, "http://app:9000", "http://"+app), g.ready)
		if err != nil {
			return err
		}
		b.procs = append(b.procs, p)
		b.pids[g.name], b.gateways[g.name] = p.Pid(), addr
	}
	return nil
}

// closedChecks counts the connections to the replicas' HTTP ports that a
// gateway closed, rather than kept for its next check, since start: the
// sockets in TIME-WAIT whose 60 s timer started after start (ss reports
// the time left in whole seconds, so a second of slack may count a few
// closed just before).
func (b *bench) closedChecks(start time.Time) int {
	out, err := exec.Command("ss", "-Htano", "state", "time-wait").Output()
	if err != nil {
		return 0
	}
	minLeft := 60 - int(time.Since(start).Seconds()) - 1
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		left, ok := timeWaitLeft(f[4])
		if !ok || left < minLeft {
			continue
		}
		for _, r := range b.replicas {
			if f[3] == r.HTTP {
				n++
			}
		}
	}
	return n
}

// timeWaitLeft reads the seconds left of "timer:(timewait,21sec,0)" (or
// "1min").
func timeWaitLeft(s string) (int, bool) {
	s, ok := strings.CutPrefix(s, "timer:(timewait,")
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, ",")
	if m, ok := strings.CutSuffix(s, "min"); ok {
		n, err := strconv.Atoi(m)
		return n * 60, err == nil
	}
	s = strings.TrimSuffix(s, "sec")
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// cpu is the CPU time the processes of a run used: the gateway (its
// workers included), the ratekit-server replicas, redis-server.
type cpu struct{ gateway, ratekit, redis time.Duration }

func (b *bench) cpu(gateway string) cpu {
	var c cpu
	c.gateway = treeCPU(b.pids[gateway])
	for _, r := range b.replicas {
		c.ratekit += treeCPU(r.Pid())
	}
	c.redis = treeCPU(b.redisPid)
	return c
}

func (c cpu) sub(o cpu) cpu {
	return cpu{c.gateway - o.gateway, c.ratekit - o.ratekit, c.redis - o.redis}
}

// treeCPU is the user and system time of pid and of its children.
func treeCPU(pid int) time.Duration {
	total := procCPU(pid)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(child); len(f) > 15 && f[1] == strconv.Itoa(pid) {
			total += procCPU(child)
		}
	}
	return total
}

// statFields returns /proc/pid/stat's fields after the command name:
// state, ppid, ...
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// procCPU is utime + stime of pid, in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// wrkResult is one wrk run.
type wrkResult struct {
	rps      float64
	requests int
	p99      time.Duration
	non2xx   int
	cpu      cpu
	closed   int // connections to the replicas closed
}

// perRequest returns d per request of r, in µs.
func (r wrkResult) perRequest(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(r.requests, 1))
}

func runWrk(target string, threads, conns int, d time.Duration) (wrkResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", d.String(), "--latency", "http://"+target)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v\n%s", err, outb)
	}
	var r wrkResult
	sc := bufio.NewScanner(strings.NewReader(string(outb)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			r.rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "99%":
			r.p99, _ = time.ParseDuration(f[1])
		case len(f) == 5 && f[0] == "Non-2xx":
			r.non2xx, _ = strconv.Atoi(f[4])
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			r.requests, _ = strconv.Atoi(f[0])
		}
	}
	if r.rps == 0 || r.p99 == 0 {
		return r, fmt.Errorf("cannot read wrk's output:\n%s", outb)
	}
	return r, nil
}

func median(rs []wrkResult) wrkResult {
	rps := make([]float64, len(rs))
	p99 := make([]time.Duration, len(rs))
	n := 0
	for i, r := range rs {
		rps[i], p99[i] = r.rps, r.p99
		n += r.non2xx
	}
	sort.Float64s(rps)
	sort.Slice(p99, func(i, j int) bool { return p99[i] < p99[j] })
	// CPU per request: over all rounds
	var c cpu
	reqs, closed := 0, 0
	for _, r := range rs {
		c.gateway += r.cpu.gateway
		c.ratekit += r.cpu.ratekit
		c.redis += r.cpu.redis
		reqs += r.requests
		closed += r.closed
	}
	return wrkResult{rps: rps[len(rps)/2], p99: p99[len(p99)/2], non2xx: n, cpu: c, requests: reqs, closed: closed}
}

// exact is one exactness run: requests sent at once from one address
// over n gateways, and how many passed.
type exact struct {
	what          string
	gateways      int
	sent, allowed int
	denial        string
}

// exactness sends 45 requests at once from a fresh loopback address over
// one, two and three nginx with limit_req at 10 a minute, and over the
// guide's two nginx with forward auth.
func (b *bench) exactness() ([]exact, error) {
	// the limits count in windows aligned to the minute: keep the runs in one
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 10*time.Second {
		time.Sleep(left + 200*time.Millisecond)
	}
	var out []exact
	ip := 10
	for _, tc := range []struct {
		what string
		gws  []string
	}{
		{"nginx `limit_req`", b.limitReq[:1]},
		{"nginx `limit_req`", b.limitReq[:2]},
		{"nginx `limit_req`", b.limitReq[:3]},
		{"nginx + ratekit-server (the guide's)", b.guideGW},
	} {
		ip++
		e, err := burst(fmt.Sprintf("127.0.9.%d", ip), tc.gws, 45)
		if err != nil {
			return nil, err
		}
		e.what = tc.what
		out = append(out, e)
	}
	return out, nil
}

func burst(ip string, gws []string, n int) (exact, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	var (
		mu      sync.Mutex
		allowed int
		denial  string
		first   error
		wg      sync.WaitGroup
	)
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			resp, err := c.Get("http://" + gws[i%len(gws)] + "/")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = err
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				allowed++
				return
			}
			if denial == "" {
				denial = describe(resp)
			}
		})
	}
	close(gate)
	wg.Wait()
	return exact{gateways: len(gws), sent: n, allowed: allowed, denial: denial}, first
}

// describe says what a denial carries.
func describe(resp *http.Response) string {
	has := func(h string) string {
		if resp.Header.Get(h) != "" {
			return "yes"
		}
		return "no"
	}
	return fmt.Sprintf("%d; Retry-After: %s; X-RateLimit-*: %s; RateLimit: %s", resp.StatusCode, has("Retry-After"), has("X-RateLimit-Limit"), has("RateLimit"))
}

// medianOf returns the median of xs.
func medianOf(xs []float64) float64 {
	xs = append([]float64(nil), xs...)
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func report(runs map[string][]wrkResult, ex []exact, rounds int, d time.Duration, conns, threads int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d alternating rounds of `wrk -t%d -c%d -d%v --latency` against each row, on this machine (%s), every process on it. Ratios are the median of each round's ratio to the gateway alone in the same round; requests/s and p99 the medians of the rounds.\n\n", rounds, threads, conns, d, cpuModel())
	s.WriteString("| gateway | requests/s | ratio | p99 | p99 ratio | CPU µs/request: gateway | ratekit-server | redis-server | checks' connections closed per 1000 requests | answers not 2xx |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		rs, base := runs[r.name], runs[rows[indexOf(r.base)].name]
		var rps, p99 []float64
		for i := range rs {
			rps = append(rps, rs[i].rps/base[i].rps)
			p99 = append(p99, float64(rs[i].p99)/float64(base[i].p99))
		}
		w := median(rs)
		closed := "–"
		if strings.Contains(r.name, "ratekit") {
			closed = fmt.Sprintf("%.1f", 1000*float64(w.closed)/float64(max(w.requests, 1)))
		}
		fmt.Fprintf(&s, "| %s | %.0f | %.2f× | %v | %.2f× | %.1f | %.1f | %.1f | %s | %d |\n", r.name, w.rps, medianOf(rps), w.p99.Round(10*time.Microsecond), medianOf(p99),
			w.perRequest(w.cpu.gateway), w.perRequest(w.cpu.ratekit), w.perRequest(w.cpu.redis), closed, w.non2xx)
	}
	s.WriteString("\nThe same limit, 10 a minute per client address, with 45 requests sent at once from one address, spread over the gateways in turn:\n\n")
	s.WriteString("| limiter | gateways | passed of 45 | a denial |\n|---|---:|---:|---|\n")
	for _, e := range ex {
		fmt.Fprintf(&s, "| %s | %d | %d | %s |\n", e.what, e.gateways, e.allowed, e.denial)
	}
	return s.String()
}

// indexOf returns the index of the row of the gateway named base alone.
func indexOf(base string) int {
	for i, r := range rows {
		if r.gateway == base && r.path == "/" && r.name == base {
			return i
		}
	}
	panic("no row for " + base)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	model, n := "unknown CPU", 0
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	return fmt.Sprintf("%s, %d CPUs", model, n)
}

const (
	begin = "<!-- speed:begin -->"
	end   = "<!-- speed:end -->"
)

// writeSection replaces the marked section of path with text, or appends
// it, marked, when the file has none.
func writeSection(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	section := begin + "\n" + text + end
	if i < 0 || j < i {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + section + "\n"
	} else {
		doc = doc[:i] + section + doc[j+len(end):]
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
