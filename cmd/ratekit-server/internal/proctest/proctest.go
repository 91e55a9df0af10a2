//go:build linux

// Package proctest starts rate limit servers (ratekit-server, or envoy's
// for the comparison) as processes on loopback ports, for tests.
package proctest

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Proc is one server process.
type Proc struct {
	Name                    string
	HTTP, GRPC, Debug, Prom string
	cmd                     *exec.Cmd
	out                     *syncBuffer
	conn                    *grpc.ClientConn
	Client                  rlspb.RateLimitServiceClient
	done                    chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreePort returns a loopback address with a port free now.
func FreePort() (string, error) {
	addrs, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreePorts returns n loopback addresses with distinct ports, free now:
// each listener is held until all are picked. Ports picked one after
// another may otherwise come out alike, which a server binding with
// SO_REUSEPORT (envoy's service, Caddy) would share without an error.
func FreePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// listeners counts the TCP sockets listening on each of addrs (IPv4
// loopback addresses) in this network namespace, from /proc/net/tcp.
func listeners(addrs ...string) (map[string]int, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	want := map[string]string{} // /proc's form, 0100007F:1F90 → addr
	for _, a := range addrs {
		host, p, err := net.SplitHostPort(a)
		ip := net.ParseIP(host).To4()
		n, perr := strconv.Atoi(p)
		if err != nil || ip == nil || perr != nil {
			return nil, fmt.Errorf("listeners: %q is not an IPv4 address with a port", a)
		}
		want[fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], n)] = a
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local_address rem_address st ...; st 0A is LISTEN
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		if a, ok := want[f[1]]; ok {
			counts[a]++
		}
	}
	return counts, nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Start starts bin with env (added to the environment of both servers'
// defaults: loopback ports picked here, statsd off, text logs), and waits
// until /healthcheck answers.
func Start(name, bin string, env map[string]string) (*Proc, error) {
	// a port picked free may be taken before the server binds it: retry
	// with other ports
	for attempt := 1; ; attempt++ {
		p, err := start(name, bin, env)
		if err == nil || attempt == 4 || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
	}
}

func start(name, bin string, env map[string]string) (*Proc, error) {
	p, err := Launch(name, bin, env)
	if err != nil {
		return nil, err
	}
	if err := p.AwaitHealthy(15 * time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Launch starts bin as Start does, without waiting for it: AwaitHealthy
// waits until it serves, and Exited, ExitCode and Log tell what became of
// it.
func Launch(name, bin string, env map[string]string) (*Proc, error) {
	p := &Proc{Name: name, out: &syncBuffer{}, done: make(chan struct{})}
	addrs, err := FreePorts(4)
	if err != nil {
		return nil, err
	}
	p.HTTP, p.GRPC, p.Debug, p.Prom = addrs[0], addrs[1], addrs[2], addrs[3]
	base := map[string]string{
		"HOST": "127.0.0.1", "PORT": port(p.HTTP),
		"GRPC_HOST": "127.0.0.1", "GRPC_PORT": port(p.GRPC),
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": port(p.Debug),
		"PROMETHEUS_ADDR": p.Prom, "USE_STATSD": "false", "LOG_LEVEL": "warn",
		"REDIS_SOCKET_TYPE": "tcp", "RUNTIME_WATCH_ROOT": "false",
	}
	for k, v := range env {
		base[k] = v
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range base {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// AwaitHealthy waits until /healthcheck answers 200 and the gRPC port
// accepts connections, within the time given, and dials the client.
func (p *Proc) AwaitHealthy(within time.Duration) error {
	if err := p.awaitHealthy(within); err != nil {
		return fmt.Errorf("%s: %w\n%s", p.Name, err, p.out.String())
	}
	// envoy's service binds its ports with SO_REUSEPORT, so a port that
	// another of its processes took between the pick and the bind is
	// shared without an error, and the kernel spreads connections over
	// both: a gRPC client may reach the other's HTTP port. Start retries.
	counts, err := listeners(p.HTTP, p.GRPC, p.Debug, p.Prom)
	if err != nil {
		return err
	}
	for a, n := range counts {
		if n > 1 {
			return fmt.Errorf("%s: address already in use: %d sockets listen on %s, this process's and another's", p.Name, n, a)
		}
	}
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	p.conn, p.Client = conn, rlspb.NewRateLimitServiceClient(conn)
	return nil
}

func (p *Proc) awaitHealthy(within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return errors.New("exited")
		default:
		}
		resp, err := http.Get("http://" + p.HTTP + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				c, err := net.DialTimeout("tcp", p.GRPC, time.Second)
				if err == nil {
					c.Close()
					return nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not healthy in time")
}

// Log returns what the process wrote.
func (p *Proc) Log() string { return p.out.String() }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode waits up to within for the process to end, and returns its
// exit code; false when it has not ended by then.
func (p *Proc) ExitCode(within time.Duration) (int, bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(within):
		return 0, false
	}
}

// Stop kills the process and waits for it.
func (p *Proc) Stop() {
	if p.conn != nil {
		p.conn.Close()
	}
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Get fetches path from addr and returns the status and body.
func Get(addr, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), err
}

// PostJSON posts body to addr's /json.
func PostJSON(addr, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/json", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), err
}

// WriteConfig writes files (name → YAML) into dir/ratelimit/config, the
// layout both servers read with RUNTIME_ROOT=dir,
// RUNTIME_SUBDIRECTORY=ratelimit.
func WriteConfig(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	if err := WriteConfigDir(dir, files); err != nil {
		tb.Fatal(err)
	}
}

// WriteConfigDir is WriteConfig returning its error.
func WriteConfigDir(dir string, files map[string]string) error {
	cd := filepath.Join(dir, "ratelimit", "config")
	if err := os.MkdirAll(cd, 0o755); err != nil {
		return err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(cd, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// RuntimeEnv is the settings that make both servers read dir's files.
func RuntimeEnv(dir string) map[string]string {
	return map[string]string{"RUNTIME_ROOT": dir, "RUNTIME_SUBDIRECTORY": "ratelimit"}
}

// Itoa is strconv.Itoa.
var Itoa = strconv.Itoa
