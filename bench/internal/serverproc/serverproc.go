// Package serverproc builds ratekit-server (cmd/ratekit-server of the tree
// the bench module builds ratekit from) and runs it as a process of the
// benchmarks' own: on free loopback ports, against a redis-server the
// benchmark started, with a configuration of one domain and one
// descriptor, stopped by its pid. Its packages are internal to its module,
// so the benchmarks reach it as envoy does, over gRPC.
package serverproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

// Domain and DescriptorKey are those of the configuration Start writes:
// one domain, one descriptor of one entry, keyed as envoy's
// remote_address action keys a client's address.
const (
	Domain        = "bench"
	DescriptorKey = "remote_address"
)

// RuleName is the rule name under which ratekit-server keeps the count of
// a limit per minute of envoy's algorithm (the default,
// RATEKIT_ALGORITHM=compatible): its keys are CACHE_KEY_PREFIX + RuleName
// + ":{" + Domain + "|" + DescriptorKey + "=" + value + "}".
const RuleName = "rl60s"

// Key returns the Redis key of descriptor value under prefix, as the
// server builds it for the configuration Start writes.
func Key(prefix, value string) string {
	return prefix + RuleName + ":{" + Domain + "|" + DescriptorKey + "=" + value + "}"
}

var built struct {
	sync.Mutex
	bin, dir string
}

// Build compiles ratekit-server once per process into a temporary
// directory, which Cleanup removes, and returns the binary's path; later
// calls return the same path. It runs the go command from the bench
// module (the working directory must be inside it), and builds the server
// of the tree that module's replace directive points at.
func Build(ctx context.Context) (string, error) {
	built.Lock()
	defer built.Unlock()
	if built.bin != "" {
		return built.bin, nil
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/ratekit/ratekit").Output()
	if err != nil {
		return "", fmt.Errorf("finding the ratekit tree (run from bench/, or pass a built ratekit-server): go list -m: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "cmd", "ratekit-server")
	dir, err := os.MkdirTemp("", "ratekit-bench-server-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ratekit-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-C", src, "-o", bin, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build -C %s: %w\n%s", src, err, b)
	}
	built.bin, built.dir = bin, dir
	return bin, nil
}

// Cleanup removes the binary Build made, if any.
func Cleanup() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
		built.bin, built.dir = "", ""
	}
}

// Options say how to run one server.
type Options struct {
	// Bin is the ratekit-server binary (from Build).
	Bin string
	// Redis is the host:port of the redis-server it keeps its counts in
	// (REDIS_URL, REDIS_TYPE SINGLE over TCP).
	Redis string
	// PerMinute is the one descriptor's limit, in requests per minute.
	PerMinute int
	// Prefix starts every Redis key of the server (CACHE_KEY_PREFIX).
	Prefix string
	// Timeout is the deadline of each decision's Redis call
	// (RATEKIT_TIMEOUT).
	Timeout time.Duration
}

// Env returns the settings Start gives the server besides its ports and
// the configuration's place, as NAME=value: for the report.
func (o Options) Env() []string {
	return []string{
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + o.Redis,
		"CACHE_KEY_PREFIX=" + o.Prefix,
		"RATEKIT_TIMEOUT=" + o.Timeout.String(),
		// a decision Redis did not make is a denial (not a local
		// decision), which the benchmarks count
		"RATEKIT_FAILURE_POLICY=closed",
		"USE_STATSD=false", "LOG_LEVEL=warn",
	}
}

// Proc is a running ratekit-server.
type Proc struct {
	// GRPC is the host:port of its gRPC listener.
	GRPC string
	// HTTP is the host:port of its HTTP listener (/healthcheck, /json).
	HTTP string
	cmd  *exec.Cmd
	dir  string
	log  *os.File
	done chan struct{}
}

// Pid returns the server's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Config returns the YAML of the configuration of a limit of perMinute.
func Config(perMinute int) string {
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: %s\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", Domain, DescriptorKey, perMinute)
}

// Start starts a server as o says, on free loopback ports, and waits
// until its /healthcheck answers 200 and its gRPC port takes connections.
// It tries a few times, in case a port it picked is taken before the
// server binds it.
func Start(o Options) (*Proc, error) {
	var lastErr error
	for range 3 {
		p, err := tryStart(o)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func tryStart(o Options) (*Proc, error) {
	dir, err := os.MkdirTemp("", "ratekit-bench-server-run-")
	if err != nil {
		return nil, err
	}
	// the layout RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY
	// (config, the default) that envoy's servers read
	conf := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(conf, "bench.yaml"), []byte(Config(o.PerMinute)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = redisproc.FreePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &Proc{
		HTTP: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		GRPC: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		dir:  dir, log: logFile, done: make(chan struct{}),
	}
	p.cmd = exec.Command(o.Bin)
	p.cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"RUNTIME_ROOT=" + filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		// watch the files themselves: there is no symlink to swap
		"RUNTIME_WATCH_ROOT=false",
	}, o.Env()...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = redisproc.SysProcAttr()
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.awaitHealthy(15 * time.Second); err != nil {
		log := p.Log()
		_ = p.Stop()
		return nil, fmt.Errorf("ratekit-server: %w\n%s", err, redisproc.Tail([]byte(log), 2000))
	}
	return p, nil
}

func (p *Proc) awaitHealthy(within time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return errors.New("exited")
		default:
		}
		if resp, err := client.Get("http://" + p.HTTP + "/healthcheck"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.DialTimeout("tcp", p.GRPC, time.Second); err == nil {
					c.Close()
					return nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not healthy in time")
}

// Log returns what the server wrote so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
	return string(b)
}

// Stop kills the server by its pid, waits until it is reaped and removes
// its directory.
func (p *Proc) Stop() error {
	defer os.RemoveAll(p.dir)
	defer p.log.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing ratekit-server pid %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("ratekit-server pid %d still running 10s after SIGKILL", p.cmd.Process.Pid)
	}
}

// Clients are gRPC connections to one server, each with envoy's rate
// limit service client.
type Clients struct {
	conns   []*grpc.ClientConn
	clients []rlspb.RateLimitServiceClient
}

// Dial opens n connections to the gRPC listener at addr.
func Dial(addr string, n int) (*Clients, error) {
	c := &Clients{}
	for range n {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, rlspb.NewRateLimitServiceClient(conn))
	}
	return c, nil
}

// Close closes every connection.
func (c *Clients) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// Caller makes one decision a call through connection i (modulo their
// number), reusing one request of one descriptor: a goroutine owns each.
type Caller struct {
	client rlspb.RateLimitServiceClient
	req    *rlspb.RateLimitRequest
	entry  *rlv3.RateLimitDescriptor_Entry
}

// Caller returns a Caller over connection i.
func (c *Clients) Caller(i int) *Caller {
	entry := &rlv3.RateLimitDescriptor_Entry{Key: DescriptorKey}
	return &Caller{
		client: c.clients[i%len(c.clients)],
		req: &rlspb.RateLimitRequest{Domain: Domain, Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{entry}},
		}},
		entry: entry,
	}
}

// ShouldRateLimit asks the server about one hit of descriptor value:
// allowed for OK, not for OVER_LIMIT, an error for anything else. gRPC
// has marshalled the request by the time the call returns, so the next
// call may change it.
func (c *Caller) ShouldRateLimit(ctx context.Context, value string) (bool, error) {
	c.entry.Value = value
	resp, err := c.client.ShouldRateLimit(ctx, c.req)
	if err != nil {
		return false, err
	}
	switch code := resp.GetOverallCode(); code {
	case rlspb.RateLimitResponse_OK:
		return true, nil
	case rlspb.RateLimitResponse_OVER_LIMIT:
		return false, nil
	default:
		return false, fmt.Errorf("ratekit-server answered %v", code)
	}
}
