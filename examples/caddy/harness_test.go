package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// These tests run the Caddy that this folder builds, as processes on
// loopback, against redis-server processes of their own
// (internal/redistest): the gateway as its users run it.

var (
	binDir    string // where TestMain builds the binary; removed at the end
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratekit-caddy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// caddyBinary builds this folder's caddy once per test binary (it takes
// a while: Caddy's tree is large) and returns its path.
func caddyBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "caddy")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %s", binPath, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freeAddrs returns n loopback addresses with distinct ports, free right
// now: each listener is held until all are picked. Caddy binds with
// SO_REUSEPORT, so two of its ports picked alike would share one socket
// address without an error.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// storeTimeout is the Redis deadline of the instances that the tests start
// unless they set one: far above the library's 50 ms, since these tests
// run several Caddy processes, a redis-server and the test's own traffic
// on a busy machine, where a short deadline would turn a moment of CPU
// starvation into a false outage, decided locally, each instance
// allowing the whole limit. The failure tests set the library's default.
const storeTimeout = time.Second

// instance is one Caddy process.
type instance struct {
	addr, admin string
	config      string   // the Caddyfile's path
	env         []string // the process's environment
	cmd         *exec.Cmd
	log         *bytes.Buffer // its output
	logMu       *sync.Mutex
}

// lockedWriter writes to a buffer under a mutex.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// startCaddy runs the caddy of this folder on config (a path) with env
// added to its environment (ADDR and ADMIN_ADDR are set to free loopback
// addresses), waits until it answers /healthz, and stops it when the test
// ends. Unless env sets TIMEOUT, the Redis deadline is [storeTimeout].
func startCaddy(t *testing.T, config string, env map[string]string) *instance {
	t.Helper()
	bin := caddyBinary(t)
	home := t.TempDir()
	addrs := freeAddrs(t, 2)
	in := &instance{addr: addrs[0], admin: addrs[1], log: new(bytes.Buffer), logMu: new(sync.Mutex)}
	in.config, _ = filepath.Abs(config)
	in.env = append(os.Environ(),
		"HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"ADDR="+in.addr, "ADMIN_ADDR="+in.admin)
	if _, ok := env["TIMEOUT"]; !ok {
		in.env = append(in.env, "TIMEOUT="+storeTimeout.String())
	}
	for k, v := range env {
		in.env = append(in.env, k+"="+v)
	}
	in.cmd = exec.Command(bin, "run", "--config", in.config, "--adapter", "caddyfile")
	in.cmd.Env = in.env
	in.cmd.Stdout = lockedWriter{in.logMu, in.log}
	in.cmd.Stderr = lockedWriter{in.logMu, in.log}
	setPdeathsig(in.cmd)
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(in.url("/healthz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return in
			}
		}
		if time.Now().After(deadline) || in.cmd.ProcessState != nil {
			t.Fatalf("caddy on %s did not answer /healthz: %v\n%s", in.addr, err, in.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url returns the URL of path on the instance.
func (in *instance) url(path string) string { return "http://" + in.addr + path }

// output returns what the process wrote so far.
func (in *instance) output() string {
	in.logMu.Lock()
	defer in.logMu.Unlock()
	return in.log.String()
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (in *instance) stop(t *testing.T) {
	if in.cmd.Process == nil || in.cmd.ProcessState != nil {
		return
	}
	_ = in.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- in.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = in.cmd.Process.Kill()
		<-done
		t.Errorf("caddy on %s did not stop within 10s", in.addr)
	}
}

// setEnv sets a variable of the environment that reloadCLI adapts the
// Caddyfile with.
func (in *instance) setEnv(name, value string) {
	in.env = append(in.env, name+"="+value) // the last one counts
}

// reloadCLI reloads the instance's config with caddy reload, which adapts
// the Caddyfile in its own process (with the instance's environment) and
// posts it to the admin endpoint.
func (in *instance) reloadCLI(t *testing.T) {
	t.Helper()
	cmd := exec.Command(caddyBinary(t), "reload", "--config", in.config, "--adapter", "caddyfile", "--address", in.admin, "--force")
	cmd.Env = in.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("caddy reload: %v\n%s", err, out)
	}
}

// reloadAPI reloads the instance's config through the admin API's /load,
// posting the Caddyfile for the server to adapt; Cache-Control:
// must-revalidate makes it reload an unchanged config.
func (in *instance) reloadAPI(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile(in.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+in.admin+"/load", bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("POST /load: %s %s", resp.Status, body)
	}
}

// goroutines returns the goroutine profile of the process, from the admin
// endpoint's pprof.
func (in *instance) goroutines(t *testing.T) goroutineProfile {
	t.Helper()
	resp, err := http.Get("http://" + in.admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return goroutineProfile(body)
}

// goroutineProfile is a goroutine profile in pprof's debug=1 text: groups
// of goroutines with one stack, each "<count> @ <pcs>" and a line per
// frame, separated by blank lines.
type goroutineProfile string

// count returns how many goroutines have a frame whose function starts
// with one of prefixes, less those with a frame of one of except; with no
// prefixes, every goroutine counts.
func (p goroutineProfile) count(prefixes, except []string) int {
	n := 0
	for group := range strings.SplitSeq(string(p), "\n\n") {
		head, frames, ok := strings.Cut(group, "\n")
		num, _, found := strings.Cut(head, " @ ")
		k, err := strconv.Atoi(num)
		if !ok || !found || err != nil {
			continue
		}
		has := func(fns []string) bool {
			return slices.ContainsFunc(fns, func(fn string) bool { return strings.Contains(frames, "\t"+fn) })
		}
		if (len(prefixes) == 0 || has(prefixes)) && !has(except) {
			n += k
		}
	}
	return n
}

// result is one answer the client got.
type result struct {
	status int
	header http.Header
	body   string
	took   time.Duration
	err    error
}

// client returns an HTTP client with room for many connections to each
// instance, closed when the test ends.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// do sends req and reads the answer.
func do(c *http.Client, req *http.Request) result {
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(body), took: time.Since(start), err: err}
}

// get sends a GET of url, from the client at clientIP when it is set: an
// X-Forwarded-For that this test, at 127.0.0.1, appends as a trusted proxy
// would (gateway.Caddyfile trusts private ranges).
func get(c *http.Client, url, clientIP string) result {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return result{err: err}
	}
	if clientIP != "" {
		req.Header.Set("X-Forwarded-For", clientIP)
	}
	return do(c, req)
}

// concurrently sends n GETs at once, the i-th to urls[i%len(urls)], and
// returns the answers in order.
func concurrently(c *http.Client, urls []string, n int, clientIP string) []result {
	out := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = get(c, urls[i%len(urls)], clientIP)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// count returns how many results have each status; errors count as 0.
func count(rs []result) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r.status]++
	}
	return m
}

// maxTook returns the longest time an answer took.
func maxTook(rs []result) time.Duration {
	var d time.Duration
	for _, r := range rs {
		d = max(d, r.took)
	}
	return d
}

// median returns the median time an answer took.
func median(rs []result) time.Duration {
	ds := make([]time.Duration, len(rs))
	for i, r := range rs {
		ds[i] = r.took
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// clientStats returns what redis-server counts of its clients: connected
// now and connections accepted since it started, less rdb's own.
func clientStats(t *testing.T, rdb *redis.Client) (connected, total int) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "clients", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) int {
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("INFO has no %s", name)
		return 0
	}
	return field("connected_clients") - 1, field("total_connections_received") - 1
}
