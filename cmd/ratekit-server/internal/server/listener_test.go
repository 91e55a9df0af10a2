package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"google.golang.org/grpc"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

// serve starts a server on set and stops it when the test ends.
func serve(t *testing.T, set settings.Settings) *Server {
	t.Helper()
	s, err := New(set, discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, _ := get(t, s.Addrs()[0], "/healthcheck"); c == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not healthy within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		// a Shutdown before gRPC's Serve began is no failure of these tests
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Error(err)
		}
	})
	return s
}

// TestDefaultBinds starts a server on the defaults (ports aside): the HTTP,
// gRPC and Prometheus ports listen on every interface, as envoy's, and the
// debug port on loopback only.
func TestDefaultBinds(t *testing.T) {
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	cd := filepath.Join(dir, "rl", "config")
	os.MkdirAll(cd, 0o755)
	os.WriteFile(filepath.Join(cd, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644)
	m := map[string]string{
		"RUNTIME_ROOT": dir, "RUNTIME_SUBDIRECTORY": "rl", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": mr.Addr(),
		"PORT": "0", "GRPC_PORT": "0", "DEBUG_PORT": "0", "USE_STATSD": "false", "USE_PROMETHEUS": "true",
	}
	set, _, err := settings.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	set.PrometheusAddr = ":0" // envoy's :9090, on a free port
	s := serve(t, set)
	addrs := s.Addrs()
	for i, want := range []string{"unspecified", "unspecified", "loopback", "unspecified"} {
		host, _, err := net.SplitHostPort(addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		ip := net.ParseIP(host)
		got := "other"
		switch {
		case ip.IsUnspecified():
			got = "unspecified"
		case ip.IsLoopback():
			got = "loopback"
		}
		if got != want {
			t.Errorf("port %d of HTTP, gRPC, debug, Prometheus listens on %s (%s), want %s", i, addrs[i], got, want)
		}
	}
}

// awaitClosed reads c until the server closes it, failing the test if it
// has not within a generous deadline.
func awaitClosed(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: still open after 15s", what)
	}
}

// TestConnectionsClosed: on every HTTP port, a keep-alive connection left
// idle and a request whose body stalls are closed after the timeouts (set
// short here), and pprof refuses a trace longer than the debug port's
// write timeout instead of streaming it.
func TestConnectionsClosed(t *testing.T) {
	set := testSettings(t, "RATEKIT_READ_TIMEOUT", "300ms", "RATEKIT_WRITE_TIMEOUT", "300ms",
		"RATEKIT_IDLE_TIMEOUT", "300ms")
	s := serve(t, set)
	addrs := s.Addrs()
	ports := map[string]string{"HTTP": addrs[0], "debug": addrs[2], "Prometheus": addrs[3]}
	for name, addr := range ports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idle, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer idle.Close()
			if _, err := io.WriteString(idle, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			awaitClosed(t, "an idle keep-alive connection", idle)

			stalled, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer stalled.Close()
			if _, err := io.WriteString(stalled, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"domain\":"); err != nil {
				t.Fatal(err)
			}
			awaitClosed(t, "a stalled body", stalled)

			headers, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer headers.Close()
			if _, err := io.WriteString(headers, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
				t.Fatal(err)
			}
			awaitClosed(t, "stalled headers", headers)
		})
	}
	t.Run("long trace", func(t *testing.T) {
		t.Parallel()
		c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("http://" + addrs[2] + "/debug/pprof/trace?seconds=3600")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "RATEKIT_PPROF_MAX_SECONDS") {
			t.Errorf("an hour's trace: %d %.80q, want 400", resp.StatusCode, body)
		}
	})
}

// TestPprofOff: RATEKIT_PPROF=false leaves pprof off the debug port and
// /rlconfig on it.
func TestPprofOff(t *testing.T) {
	s := serve(t, testSettings(t, "RATEKIT_PPROF", "false"))
	debug := s.Addrs()[2]
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/heap"} {
		if c, body := get(t, debug, p); c == 200 || strings.Contains(body, "pprof") {
			t.Errorf("%s: %d %.40q with pprof off", p, c, body)
		}
	}
	if c, _ := get(t, debug, "/rlconfig"); c != 200 {
		t.Errorf("/rlconfig: %d", c)
	}
}
