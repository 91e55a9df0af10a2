package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerLifecycle(t *testing.T) {
	s := StartServer(t)
	ctx := context.Background()
	addr := s.Addr()
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", addr)
	}
	if s.Pid() <= 0 {
		t.Fatalf("Pid() = %d", s.Pid())
	}

	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want \"v\"", got, err)
	}
	// No persistence.
	if got, err := c.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", got, err)
	}
	if got, err := c.ConfigGet(ctx, "appendonly").Result(); err != nil || got["appendonly"] != "no" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want no", got, err)
	}

	// Pause: a client with a short read timeout times out.
	short := s.Client(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	if err := short.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}
	s.Pause(t)
	// The error says the read deadline passed: no answer came.
	if err := short.Get(ctx, "k").Err(); !isTimeout(err) {
		t.Fatalf("GET on paused server: err = %v, want a timeout", err)
	}
	s.Resume(t)
	if got, err := short.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after resume = %q, %v; want \"v\"", got, err)
	}

	// Kill: pings fail.
	oldPid := s.Pid()
	s.Kill(t)
	s.Kill(t) // a second Kill is a no-op
	if err := short.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	if err := s.Client(t, func(o *redis.Options) { o.MaxRetries = -1 }).Ping(ctx).Err(); err == nil {
		t.Fatal("PING from a new client after Kill succeeded")
	}

	// Restart: same address, new process, empty data set.
	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Addr after Restart = %q, want %q", s.Addr(), addr)
	}
	if s.Pid() == oldPid {
		t.Fatalf("Pid after Restart = %d, same as before", s.Pid())
	}
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart with the first client: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: err = %v, want redis.Nil (nothing persisted)", err)
	}

	// Restart of a running server kills it first.
	oldPid = s.Pid()
	s.Restart(t)
	if s.Pid() == oldPid {
		t.Fatal("Restart of a running server kept its process")
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func TestCleanupKillsServer(t *testing.T) {
	var pid int
	var addr string
	t.Run("inner", func(t *testing.T) {
		s := StartServer(t)
		s.Pause(t) // cleanup must kill a paused server too
		pid, addr = s.Pid(), s.Addr()
	})
	if p, err := os.FindProcess(pid); err == nil {
		// The child has been reaped, so signal 0 reports it gone.
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("redis-server pid %d still running after cleanup", pid)
		}
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after cleanup", addr)
	}
}

func TestExtraArgs(t *testing.T) {
	s := StartServer(t, "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["maxmemory"] != "10485760" || got["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("CONFIG GET maxmemory* = %v", got)
	}
	// Restart keeps the arguments.
	s.Restart(t)
	got, err = s.Client(t).ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "10485760" {
		t.Fatalf("after Restart, CONFIG GET maxmemory = %v, %v", got, err)
	}
}

func TestParallelServers(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	seen := make(map[string]bool)
	for i := range n {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			s := StartServer(t)
			mu.Lock()
			if seen[s.Addr()] {
				t.Errorf("address %s handed out twice", s.Addr())
			}
			seen[s.Addr()] = true
			mu.Unlock()
			if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCommandStats(t *testing.T) {
	s := StartServer(t)
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil { // connection handshake done before the reset
		t.Fatal(err)
	}
	s.ResetStats(t, ctx)
	if got := s.CommandStats(t, ctx)["get"]; got != 0 {
		t.Fatalf("get calls after ResetStats = %d, want 0", got)
	}
	for range 5 {
		if err := c.Get(ctx, "missing").Err(); !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	if err := c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"missing"}).Err(); !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	stats := s.CommandStats(t, ctx)
	if stats["get"] != 6 {
		t.Errorf("get calls = %d, want 6 (5 direct, 1 from a script); stats: %v", stats["get"], stats)
	}
	if stats["eval"] != 1 {
		t.Errorf("eval calls = %d, want 1; stats: %v", stats["eval"], stats)
	}
	s.ResetStats(t, ctx)
	if got := s.CommandStats(t, ctx)["get"]; got != 0 {
		t.Errorf("get calls after second ResetStats = %d, want 0", got)
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_get:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_EVALSHA:calls=12,usec=100,usec_per_call=8.33,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"get": 3, "evalsha": 12, "config|resetstat": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := parseCommandStats("cmdstat_get:usec=1\r\n"); err == nil {
		t.Error("no error for a line without calls")
	}
}

func TestCluster(t *testing.T) {
	start := time.Now()
	cl := StartCluster(t, 3)
	t.Logf("cluster %v ready in %v", cl.Addrs(), time.Since(start))
	if len(cl.Addrs()) != 3 || len(cl.Servers()) != 3 {
		t.Fatalf("Addrs() = %v, Servers() has %d", cl.Addrs(), len(cl.Servers()))
	}
	ctx := context.Background()
	cc := cl.Client(t)
	const keys = 100
	for i := range keys {
		if err := cc.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key:%d: %v", i, err)
		}
	}
	total := int64(0)
	for _, s := range cl.Servers() {
		n, err := s.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", s.Addr(), err)
		}
		if n == 0 {
			t.Errorf("master %s holds no key", s.Addr())
		}
		total += n
	}
	if total != keys {
		t.Errorf("masters hold %d keys in all, want %d", total, keys)
	}
	for i := range keys {
		if got, err := cc.Get(ctx, fmt.Sprintf("key:%d", i)).Int(); err != nil || got != i {
			t.Fatalf("GET key:%d = %d, %v", i, got, err)
		}
	}

	// A restarted node comes back empty, keeps its slots and, once the
	// cluster is ready again, serves them.
	node := cl.Servers()[1]
	node.Kill(t)
	node.Restart(t)
	cl.WaitReady(t)
	if n, err := node.Client(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE on restarted node = %d, %v; want 0", n, err)
	}
	for i := range keys {
		if err := cc.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key:%d after node restart: %v", i, err)
		}
	}
	if n, err := node.Client(t).DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("DBSIZE on restarted node after writes = %d, %v; want > 0", n, err)
	}
}

// TestRequire runs Available and Require against a PATH of the test's
// own: without redis-server Require skips the test, or fails it under
// CI=true, with a message saying how to install it; a file of that name
// that cannot be executed does not count; with an executable on PATH the
// test runs.
func TestRequire(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake redis-server is a shell script")
	}
	for _, tc := range []struct {
		name      string
		mode      os.FileMode // of the file named redis-server on PATH; 0 for none
		ci        string
		available bool
		want      string // how Require ends the test: "run", "skip" or "fail"
	}{
		{"missing", 0, "", false, "skip"},
		{"missing under CI=true", 0, "true", false, "fail"},
		{"missing under CI=false", 0, "false", false, "skip"},
		{"not executable", 0o644, "", false, "skip"},
		{"installed", 0o755, "", true, "run"},
		{"installed under CI=true", 0o755, "true", true, "run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.mode != 0 {
				if err := os.WriteFile(filepath.Join(dir, binary), []byte("#!/bin/sh\nexit 0\n"), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", dir)
			t.Setenv("CI", tc.ci)
			if got := Available(); got != tc.available {
				t.Errorf("Available() = %v, want %v", got, tc.available)
			}
			got, msg := ending(Require)
			if got != tc.want {
				t.Fatalf("Require: the test would %s (%q), want %s", got, msg, tc.want)
			}
			if got != "run" && !strings.Contains(msg, "apt-get install "+binary) {
				t.Errorf("Require's message %q does not say how to install redis-server", msg)
			}
			if got == "fail" && !strings.Contains(msg, "CI=true") {
				t.Errorf("Require's message %q does not say CI=true made it fail", msg)
			}
		})
	}
}

// endingTB records how a helper ends the test it is given.
type endingTB struct {
	testing.TB // nil: any other method panics
	ended, msg string
}

func (r *endingTB) Helper() {}

func (r *endingTB) Skip(args ...any) {
	r.ended, r.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *endingTB) Fatal(args ...any) {
	r.ended, r.msg = "fail", fmt.Sprint(args...)
	runtime.Goexit()
}

// ending calls f on a goroutine of its own, as the testing package runs a
// test, and reports whether it let the test run, skipped it or failed it,
// with the message it gave.
func ending(f func(testing.TB)) (how, msg string) {
	r := &endingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	if r.ended == "" {
		return "run", ""
	}
	return r.ended, r.msg
}

// pickSequence returns a port picker that hands out ports in order, then
// falls back to freePort.
func pickSequence(ports ...int) func() (int, error) {
	var mu sync.Mutex
	return func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(ports) == 0 {
			return freePort()
		}
		p := ports[0]
		ports = ports[1:]
		return p, nil
	}
}

func TestStartRetriesOnTakenPort(t *testing.T) {
	// A port that redis-server cannot bind.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	// A port where another redis-server already answers.
	other := StartServer(t)
	otherPort := other.Addr()[len("127.0.0.1:"):]
	var foreign int
	if _, err := fmt.Sscan(otherPort, &foreign); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, pickSequence(taken, foreign), nil, nil)
	if s.port == taken || s.port == foreign {
		t.Fatalf("server started on taken port %d", s.port)
	}
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The other server was left alone.
	if err := other.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the other server: %v", err)
	}
}

// TestRestartWaitsForPort holds a killed server's port until Restart's
// first attempt has failed to bind it, then frees it: Restart must retry
// and succeed.
func TestRestartWaitsForPort(t *testing.T) {
	s := StartServer(t)
	s.Kill(t)
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("holding the killed server's port: %v", err)
	}
	fi, err := os.Stat(s.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	offset := fi.Size()
	launches := func() int { return strings.Count(s.logSince(offset), "=== redistest:") }
	stop, freed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(freed)
		defer l.Close()
		for launches() == 0 || !strings.Contains(s.logSince(offset), "Address already in use") {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-freed })
	s.Restart(t)
	<-freed
	if n := launches(); n < 2 {
		t.Fatalf("Restart launched redis-server %d time(s), want a retry after the port was taken:\n%s", n, s.logSince(offset))
	}
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestServerChosen: the servers, nodes and Sentinels started are the ones
// RATEKIT_TEST_SERVER chooses: Valkey's INFO names it with server_name,
// which Redis's lacks.
func TestServerChosen(t *testing.T) {
	info, err := doString(t.Context(), StartServer(t).Addr(), "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	valkey := infoFields(info)["server_name"] == "valkey"
	if want := Binary() == "valkey-server"; valkey != want {
		t.Fatalf("%s=%q: the server is Valkey: %v, want %v", ServerEnv, os.Getenv(ServerEnv), valkey, want)
	}
	sen := StartSentinel(t)
	info, err = doString(t.Context(), sen.Addrs()[0], "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	if got := infoFields(info)["server_name"] == "valkey"; got != valkey {
		t.Fatalf("a Sentinel is Valkey: %v, the server: %v", got, valkey)
	}
}
