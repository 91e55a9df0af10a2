//go:build linux

package main_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// launchWithoutRedis starts a ratekit-server, without waiting for it,
// on the address of a redis-server that is not running (killed after
// it picked its port), which it returns to start again.
func launchWithoutRedis(t *testing.T, env map[string]string) (*proctest.Proc, *redistest.Server) {
	t.Helper()
	redistest.Require(t)
	rs := redistest.StartServer(t)
	rs.Kill(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"o.yaml": outageConfig})
	e := proctest.RuntimeEnv(dir)
	e["REDIS_URL"] = rs.Addr()
	for k, v := range env {
		e[k] = v
	}
	p, err := proctest.Launch("ratekit", binary, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("server log:\n%s", p.Log())
		}
	})
	return p, rs
}

// TestRedisUpLater starts the server before Redis: it asks again, with
// REDIS_STARTUP_*'s backoff, and serves nothing meanwhile; once
// redis-server starts, it serves, deciding on Redis.
func TestRedisUpLater(t *testing.T) {
	p, rs := launchWithoutRedis(t, map[string]string{
		"REDIS_STARTUP_INITIAL_INTERVAL": "100ms", "REDIS_STARTUP_MAX_INTERVAL": "400ms",
	})
	eventually(t, time.Minute, "a second attempt at Redis logged", func() bool {
		return strings.Count(p.Log(), "Redis does not answer at start") >= 2
	})
	if p.Exited() {
		t.Fatal("the server exited instead of waiting for Redis")
	}
	if code, _, err := proctest.Get(p.HTTP, "/healthcheck"); err == nil {
		t.Fatalf("/healthcheck answered %d while Redis is not up; want nothing served", code)
	}
	rs.Restart(t)
	if err := p.AwaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := p.Client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "o", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("k", "1")}})
	if err != nil || r.GetOverallCode() != rlspb.RateLimitResponse_OK {
		t.Fatalf("%v %v", r, err)
	}
	if n, err := rs.Client(t).DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("nothing counted in Redis: %d keys, %v", n, err)
	}
}

// TestRedisNeverUp: past REDIS_STARTUP_MAX_ELAPSED_TIME without Redis the
// server exits 1, saying so.
func TestRedisNeverUp(t *testing.T) {
	p, rs := launchWithoutRedis(t, map[string]string{
		"REDIS_STARTUP_INITIAL_INTERVAL": "100ms", "REDIS_STARTUP_MAX_INTERVAL": "200ms", "REDIS_STARTUP_MAX_ELAPSED_TIME": "1s",
	})
	code, exited := p.ExitCode(2 * time.Minute)
	if !exited || code != 1 {
		t.Fatalf("exited %v with %d; want exit 1", exited, code)
	}
	for _, want := range []string{"cannot start", "redis did not answer at start", rs.Addr(), "REDIS_STARTUP_MAX_ELAPSED_TIME=1s"} {
		if !strings.Contains(p.Log(), want) {
			t.Errorf("no %q in the log", want)
		}
	}
}

// TestStopWhileWaitingForRedis: SIGTERM ends the wait for Redis, however
// long REDIS_STARTUP_MAX_ELAPSED_TIME (here 0, for ever) would have it.
func TestStopWhileWaitingForRedis(t *testing.T) {
	p, _ := launchWithoutRedis(t, map[string]string{"REDIS_STARTUP_INITIAL_INTERVAL": "100ms", "REDIS_STARTUP_MAX_INTERVAL": "200ms"})
	eventually(t, time.Minute, "an attempt at Redis logged", func() bool {
		return strings.Contains(p.Log(), "Redis does not answer at start")
	})
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, exited := p.ExitCode(time.Minute)
	if !exited || code != 1 || !strings.Contains(p.Log(), "context canceled") {
		t.Fatalf("after SIGTERM: exited %v with %d", exited, code)
	}
}
