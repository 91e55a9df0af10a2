package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testSettings(t *testing.T, kv ...string) settings.Settings {
	t.Helper()
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	cd := filepath.Join(dir, "rl", "config")
	os.MkdirAll(cd, 0o755)
	os.WriteFile(filepath.Join(cd, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644)
	m := map[string]string{
		"RUNTIME_ROOT": dir, "RUNTIME_SUBDIRECTORY": "rl", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": mr.Addr(),
		"HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0", "DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": "0",
		"USE_STATSD": "false", "USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	s, _, err := settings.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLifecycle starts a server, serves, and shuts it down: every
// goroutine it started ends (goleak), and the health check fails first.
// Serving is news, not a warning: it is logged at INFO.
func TestLifecycle(t *testing.T) {
	rec := newRecorder()
	s, err := New(testSettings(t), slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	addrs := s.Addrs()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, _ := get(t, addrs[0], "/healthcheck"); c == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c, body := get(t, addrs[2], "/rlconfig"); c != 200 || !strings.Contains(body, "d.k: unit=MINUTE requests_per_unit=1") {
		t.Fatalf("/rlconfig: %d %q", c, body)
	}
	if c, body := get(t, addrs[2], "/ratekit/status.json"); c != 200 || !strings.Contains(body, `"name": "compatible"`) || !strings.Contains(body, `"name": "ratekit"`) {
		t.Fatalf("/ratekit/status.json on the debug port: %d %q", c, body)
	}
	if c, body := get(t, addrs[2], "/ratekit/"); c != 200 || !strings.Contains(body, "ratekit") {
		t.Fatalf("/ratekit/ on the debug port: %d %q", c, body)
	}
	if c, body := get(t, addrs[3], "/metrics"); c != 200 || !strings.Contains(body, "ratelimit_service_config_load_success 1") || !strings.Contains(body, "ratekit_breaker_state") {
		t.Fatalf("/metrics: %d\n%s", c, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Shutdown(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := rec.levelsOf("serving"); !slices.Equal(got, []slog.Level{slog.LevelInfo}) {
		t.Errorf("\"serving\" logged at %v, want once at INFO", got)
	}
}

// TestRefusesBrokenFirstConfig: without FORCE_START_WITHOUT_INITIAL_CONFIG
// a first configuration that does not load stops the start.
func TestRefusesBrokenFirstConfig(t *testing.T) {
	set := testSettings(t)
	os.WriteFile(filepath.Join(set.RuntimeRoot, "rl", "config", "b.yaml"), []byte("domain: e\nbad: 1\n"), 0o644)
	if _, err := New(set, discard); err == nil || !strings.Contains(err.Error(), "b.yaml:2: config error, unknown key 'bad'") {
		t.Fatalf("New: %v", err)
	}
	set.ForceStart = true
	s, err := New(set, discard)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestWaitsForRedis: without Redis, New waits (here until its context
// ends), unless RATEKIT_START_WITHOUT_REDIS, with which it serves at once,
// deciding by the failure policy.
func TestWaitsForRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewContext(ctx, testSettings(t, "REDIS_URL", down), discard); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), down) {
		t.Fatalf("New without Redis, its context ended: %v", err)
	}
	s, err := NewContext(ctx, testSettings(t, "REDIS_URL", down, "RATEKIT_START_WITHOUT_REDIS", "true"), discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		s.Shutdown(sctx)
		<-done
	}()
	if c, body := get(t, s.Addrs()[0], "/healthcheck"); c != 200 {
		t.Fatalf("/healthcheck: %d %s", c, body)
	}
}
