// Package redistest starts real redis-server processes for tests and stops
// them when the test ends. With RATEKIT_TEST_SERVER=valkey in the
// environment it starts valkey-server processes instead, for every
// server, node and Sentinel (see [ServerEnv]).
//
// Every server listens on its own free port on 127.0.0.1, keeps nothing on
// disk (no RDB snapshots, no AOF) and works in a directory of its own from
// [testing.TB.TempDir], so tests in several packages, run at the same time by
// separate go test processes, never share a server or a port. The server's
// output goes to a log file in that directory; the end of it is included in
// every failure message of this package.
//
// Servers are stopped with SIGKILL, by process id, in a cleanup function
// registered on the test that started them. On Linux a server also gets
// SIGKILL if the test binary itself dies.
//
// Tests call [Require] (which [StartServer], [StartCluster],
// [StartReplicatedCluster] and [StartSentinel] do for them) so that they
// are skipped where redis-server is not installed, except in CI (CI=true),
// where a missing redis-server fails the test instead.
//
// [StartReplicatedCluster] (masters with replicas) and [StartSentinel] (a
// master, a replica and three Sentinels) fail over within seconds of
// [Server.Kill] of a master; [Server.AwaitPromotion] waits for it.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerEnv names the environment variable that chooses the server the
// helpers start: "valkey" for valkey-server (Sentinels too run as
// valkey-server --sentinel), "redis" or nothing for redis-server.
const ServerEnv = "RATEKIT_TEST_SERVER"

// binary is the server executable looked up on PATH, as ServerEnv
// chooses; "" for a value of ServerEnv that names no server.
var binary = map[string]string{"": "redis-server", "redis": "redis-server", "valkey": "valkey-server"}[os.Getenv(ServerEnv)]

// Binary returns the name of the server executable the helpers start:
// redis-server, or valkey-server when the environment has
// RATEKIT_TEST_SERVER=valkey.
func Binary() string { return binary }

const (
	// startTimeout bounds the wait for a new process to answer PING.
	startTimeout = 15 * time.Second
	// startAttempts is how many ports StartServer tries when the one it
	// picked turns out to be taken.
	startAttempts = 5
	// restartRetryFor is how long Restart keeps retrying while the server's
	// port is still taken.
	restartRetryFor = 10 * time.Second
	// stopTimeout bounds the wait for a killed process to be reaped.
	stopTimeout = 10 * time.Second
	// probeTimeout bounds one readiness probe.
	probeTimeout = 500 * time.Millisecond

	// logTailLines is how many lines of the server log failure messages show.
	logTailLines = 40
)

// errPortInUse reports that a new process could not serve on its port:
// either it could not bind it or another server answers there.
var errPortInUse = errors.New("port already in use")

// Available reports whether the server executable ([Binary]) is on PATH.
func Available() bool {
	if binary == "" {
		return false
	}
	_, err := exec.LookPath(binary)
	return err == nil
}

// Require skips the test when the server executable ([Binary]) is not on
// PATH, with a message saying how to install it. When the environment has
// CI=true it fails the test with t.Fatal instead, so that a CI machine
// without the server cannot pass by skipping every test that needs it.
func Require(tb testing.TB) {
	tb.Helper()
	if binary == "" {
		tb.Fatalf("redistest: %s=%q names no server; want redis or valkey", ServerEnv, os.Getenv(ServerEnv))
	}
	if Available() {
		return
	}
	msg := "redistest: " + binary + " not found on PATH; " +
		"install it to run this test (Debian/Ubuntu: apt-get install " + binary + ")"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + " [CI=true: failing instead of skipping]")
	}
	tb.Skip(msg)
}

// Server is a redis-server process started by [StartServer] or as a node of
// a [Cluster]. Its address stays the same for its whole life, across
// [Server.Kill] and [Server.Restart].
//
// The methods of a Server may be called from several goroutines, but those
// that take a testing.TB call its Fatal method on failure, which must happen
// on the goroutine running the test.
type Server struct {
	bin     string   // path of redis-server
	dir     string   // working directory (--dir), from tb.TempDir
	logPath string   // redis-server's stdout and stderr
	args    []string // command line, except --port
	conf    string   // configuration file, first on the command line; "" for none
	port    int
	addr    string
	// deciders are the processes that decide this server's role (a
	// replica's Sentinels), whose logs a failed wait shows with its own
	deciders []*Server

	mu      sync.Mutex // guards proc and serializes process control
	logFile *os.File
	proc    *process // the latest process started; nil before the first
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // result of cmd.Wait, set before done is closed
}

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGCONT (a stopped process is killed all the same, but this
// keeps the order of events simple) and SIGKILL to the process, and waits
// until it has been reaped. It is a no-op on a nil or exited process.
func (p *process) kill() error {
	if p == nil || p.exited() {
		return nil
	}
	_ = continueProcess(p.cmd.Process)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing redis-server pid %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("redis-server pid %d did not exit within %v of SIGKILL", p.cmd.Process.Pid, stopTimeout)
	}
}

// StartServer starts a standalone redis-server on a free port of 127.0.0.1,
// waits until it answers PING and registers a cleanup on tb that kills it.
// It calls [Require] first, so the test is skipped (or fails, in CI) when
// redis-server is not installed.
//
// The server keeps nothing on disk (--save "" --appendonly no) and works in
// a directory of its own from tb.TempDir, where it also logs. extraArgs are
// appended to its command line, in the form redis-server takes them
// ("--maxmemory", "10mb"), and override the defaults of this package; they
// must not change --port, --bind or --dir. They are used again by
// [Server.Restart].
//
// If the chosen port is taken before the server binds it (by another test
// process, say), StartServer retries on another port a few times.
func StartServer(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	return startServer(tb, freePort, nil, extraArgs)
}

// startServer starts a server on a port from pick, with modeArgs (for a
// cluster node) and then extraArgs added to the command line.
func startServer(tb testing.TB, pick func() (int, error), modeArgs, extraArgs []string) *Server {
	tb.Helper()
	return startServerConf(tb, pick, "", modeArgs, extraArgs)
}

// startServerConf is startServer for a server that also reads conf, a
// configuration file written to its directory before it starts (which a
// Sentinel needs: it rewrites the file as it learns).
func startServerConf(tb testing.TB, pick func() (int, error), conf string, modeArgs, extraArgs []string) *Server {
	tb.Helper()
	Require(tb)
	bin, err := exec.LookPath(binary)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	dir := tb.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatalf("redistest: creating log file: %v", err)
	}
	s := &Server{bin: bin, dir: dir, logPath: logPath, logFile: logFile}
	if conf != "" {
		s.conf = filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
			logFile.Close()
			tb.Fatalf("redistest: writing %s: %v", s.conf, err)
		}
	}
	s.args = append(s.args,
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", "", // log to stdout, which goes to logFile
	)
	s.args = append(s.args, modeArgs...)
	s.args = append(s.args, extraArgs...)
	// Registered after tb.TempDir, so it runs before the directory is
	// removed.
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Errorf("redistest: stopping redis-server on %s: %v", s.addr, err)
		}
		s.logFile.Close()
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port, err := pick()
		if err != nil {
			tb.Fatalf("redistest: finding a free port: %v", err)
		}
		s.port = port
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.launch()
		if err == nil {
			return s
		}
		errs = append(errs, fmt.Errorf("attempt %d on %s: %w", attempt, s.addr, err))
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	tb.Fatalf("redistest: could not start redis-server: %v\n%s", errors.Join(errs...), s.logTail())
	return nil
}

// launch starts a new process on s.port and waits until it answers PING.
// On failure the process is killed. The caller holds s.mu.
func (s *Server) launch() error {
	var offset int64
	if fi, err := s.logFile.Stat(); err == nil {
		offset = fi.Size()
	}
	args := append([]string{"--port", strconv.Itoa(s.port)}, s.args...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}
	fmt.Fprintf(s.logFile, "=== redistest: %s %s\n", s.bin, strings.Join(quoteArgs(args), " "))

	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = s.logFile
	cmd.Stderr = s.logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p

	if err := s.awaitReady(p, offset); err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return err
	}
	return nil
}

// awaitReady waits until p answers PING on s.addr. Output of p starts at
// logOffset in the log file.
func (s *Server) awaitReady(p *process, logOffset int64) error {
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(startTimeout)
	// Probes are cut short when the process exits: whatever listens on the
	// port then is not worth waiting for.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if p.exited() {
			if strings.Contains(s.logSince(logOffset), "Address already in use") {
				return fmt.Errorf("%w: redis-server pid %d could not bind (%v)", errPortInUse, pid, p.err)
			}
			return fmt.Errorf("redis-server pid %d exited before answering PING: %v", pid, p.err)
		}
		answeredBy, err := probe(ctx, s.addr)
		if err == nil {
			if answeredBy == pid {
				return nil
			}
			// Our process will fail to bind; someone else's server, started
			// at the same time, got the port.
			return fmt.Errorf("%w: %s is answered by redis-server pid %d, not by pid %d started here",
				errPortInUse, s.addr, answeredBy, pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server pid %d did not answer PING on %s within %v: %v", pid, s.addr, startTimeout, err)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// probe sends PING to addr and returns the process id of the server that
// answered.
func probe(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	pong, err := doString(ctx, addr, "PING")
	if err != nil {
		return 0, err
	}
	if pong != "PONG" {
		return 0, fmt.Errorf("PING answered %q", pong)
	}
	info, err := doString(ctx, addr, "INFO", "server")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(infoFields(info)["process_id"])
}

// stop kills the current process, if any, and waits for it to exit.
func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.kill()
}

// running returns the current process, or fails tb if there is none.
// The caller holds s.mu.
func (s *Server) running(tb testing.TB, op string) *process {
	tb.Helper()
	if s.proc == nil || s.proc.exited() {
		tb.Fatalf("redistest: %s: redis-server on %s is not running", op, s.addr)
	}
	return s.proc
}

// Addr returns the address the server listens on, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Pid returns the process id of the server's current process, or of its last
// one once it has been killed.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// LogPath returns the path of the file that receives the server's output.
func (s *Server) LogPath() string { return s.logPath }

// Client returns a new go-redis client for the server, closed when tb's test
// ends. The options start from go-redis defaults with Addr set; each opts
// function may change them before the client is created.
func (s *Server) Client(tb testing.TB, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	o := &redis.Options{Addr: s.addr}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the server and waits until the process has exited.
// Killing a server that is not running does nothing. [Server.Restart] starts
// it again.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatalf("redistest: %v\n%s", err, s.logTail())
	}
}

// Pause sends SIGSTOP to the server. Until [Server.Resume], connections to it
// are still accepted by the kernel but no request gets an answer, which lets
// a test exercise client timeouts. A paused server is still killed at
// cleanup.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(tb, "Pause")
	if err := stopProcess(p.cmd.Process); err != nil {
		tb.Fatalf("redistest: SIGSTOP to redis-server pid %d: %v", p.cmd.Process.Pid, err)
	}
	if err := waitStopped(p.cmd.Process.Pid, 5*time.Second); err != nil {
		tb.Fatalf("redistest: pausing redis-server: %v", err)
	}
}

// Resume sends SIGCONT to a server stopped by [Server.Pause]. Requests sent
// while it was paused are then served.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(tb, "Resume")
	if err := continueProcess(p.cmd.Process); err != nil {
		tb.Fatalf("redistest: SIGCONT to redis-server pid %d: %v", p.cmd.Process.Pid, err)
	}
}

// Restart starts a new redis-server process on the same address, with the
// same arguments and directory, and waits until it answers PING. A server
// that is still running is killed first. The new process starts empty, since
// nothing is persisted (a cluster node keeps its cluster configuration,
// which is in its directory).
//
// If the port cannot be bound yet, Restart retries for a few seconds before
// failing the test.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(); err != nil {
		tb.Fatalf("redistest: restart: %v\n%s", err, s.logTail())
	}
	deadline := time.Now().Add(restartRetryFor)
	var errs []error
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			tb.Fatalf("redistest: could not restart redis-server on %s: %v\n%s", s.addr, errors.Join(errs...), s.logTail())
		}
		time.Sleep(time.Duration(min(attempt, 5)) * 100 * time.Millisecond)
	}
}

// CommandStats returns the number of calls of each command since the server
// started or since the last [Server.ResetStats], from INFO commandstats. Keys
// are lower-case command names as Redis reports them ("get", "eval",
// "evalsha"; subcommands as "config|resetstat"). Commands that a script runs
// with redis.call are counted under their own names as well.
func (s *Server) CommandStats(tb testing.TB, ctx context.Context) map[string]int64 {
	tb.Helper()
	info, err := doString(ctx, s.addr, "INFO", "commandstats")
	if err != nil {
		tb.Fatalf("redistest: INFO commandstats on %s: %v", s.addr, err)
	}
	stats, err := parseCommandStats(info)
	if err != nil {
		tb.Fatalf("redistest: INFO commandstats on %s: %v", s.addr, err)
	}
	return stats
}

// parseCommandStats parses lines such as
// "cmdstat_get:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=0".
func parseCommandStats(info string) (map[string]int64, error) {
	stats := make(map[string]int64)
	for key, value := range infoFields(info) {
		name, ok := strings.CutPrefix(key, "cmdstat_")
		if !ok {
			continue
		}
		found := false
		for _, field := range strings.Split(value, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad calls count in %q", key+":"+value)
			}
			stats[strings.ToLower(name)] = n
			found = true
		}
		if !found {
			return nil, fmt.Errorf("no calls count in %q", key+":"+value)
		}
	}
	return stats, nil
}

// ResetStats resets the server's statistics, including those read by
// [Server.CommandStats], with CONFIG RESETSTAT.
func (s *Server) ResetStats(tb testing.TB, ctx context.Context) {
	tb.Helper()
	if _, err := doString(ctx, s.addr, "CONFIG", "RESETSTAT"); err != nil {
		tb.Fatalf("redistest: CONFIG RESETSTAT on %s: %v", s.addr, err)
	}
}

// logSince returns the log written from offset on.
func (s *Server) logSince(offset int64) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

// logTail returns the last lines of the server log, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read redis-server log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s\n--- end of log ---", s.logPath, strings.Join(lines, "\n"))
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// quoteArgs quotes the empty and blank arguments of a command line for
// display.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return out
}

// WarmConns leaves n connections of client's pool open and initialised, as
// traffic keeps a pool: go-redis sends a new connection's handshake
// (HELLO) with its first command, so that a command on a fresh connection
// waits for one reply more. n blocking pops of 50 ms at once hold n
// connections together.
func WarmConns(tb testing.TB, client *redis.Client, n int) {
	tb.Helper()
	key := fmt.Sprintf("redistest:warm:%d", rand.Uint64())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if err := client.Do(context.Background(), "BLPOP", key, "0.05").Err(); err != nil && !errors.Is(err, redis.Nil) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	if got := client.PoolStats().TotalConns; got < uint32(n) {
		tb.Fatalf("redistest: %d connections open after %d pops at once, want %d", got, n, n)
	}
}
