//go:build linux

package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

const outageConfig = `
domain: o
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 1000000, algorithm: gcra}
  - key: held
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// outageTraffic is requests for an envoy-counted and a GCRA descriptor of
// many identities.
func outageTraffic(clients []rlspb.RateLimitServiceClient) *traffic {
	return runTraffic(clients, 6, func(i int) *rlspb.RateLimitRequest {
		return &rlspb.RateLimitRequest{Domain: "o", Descriptors: []*rlv3.RateLimitDescriptor{
			descriptor("k", fmt.Sprint(i%20)), descriptor("g", fmt.Sprint(i%20)),
		}}
	})
}

// held sends n requests for a fresh descriptor of 100 per minute and
// returns how many passed.
func held(t *testing.T, c rlspb.RateLimitServiceClient, id string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		r, err := c.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "o", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("held", id)}})
		if err != nil {
			t.Fatalf("an error reached the caller: %v", err)
		}
		if r.GetOverallCode() == rlspb.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

// backOnRedis waits until the server writes to rs again (a key of the
// traffic appears there), and returns how long that took.
func backOnRedis(t *testing.T, rs *redistest.Server, within time.Duration) time.Duration {
	t.Helper()
	c := rs.Client(t)
	_ = c.FlushAll(context.Background()).Err()
	return eventually(t, within, "back on Redis", func() bool {
		n, err := c.DBSize(context.Background()).Result()
		return err == nil && n > 0
	})
}

// maxAnswer bounds every answer during an outage: the 50 ms deadline and
// room for a loaded machine running the race detector.
const maxAnswer = time.Second

// TestRedisOutage kills, pauses and restarts the redis-server under
// traffic: no answer is an error, none is slower than the deadline and a
// margin, a limit still holds on the replica while Redis is away, and
// the server is back on Redis by itself.
func TestRedisOutage(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"o.yaml": outageConfig})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr(), "LOG_LEVEL": "warn"})
	clients := conns(t, 2, p.GRPC)
	awaitWindow(time.Minute, 15*time.Second)
	tr := outageTraffic(clients)
	defer tr.end()
	time.Sleep(300 * time.Millisecond)

	rs.Kill(t)
	time.Sleep(500 * time.Millisecond)
	if got := held(t, clients[0], "killed", 150); got != 100 {
		t.Errorf("with Redis killed, %d of 150 passed a limit of 100; want 100 (the replica's own count)", got)
	}
	rs.Restart(t)
	t.Logf("killed: back on Redis %v after the restart", backOnRedis(t, rs, 5*time.Second))

	rs.Pause(t)
	time.Sleep(500 * time.Millisecond)
	if got := held(t, clients[0], "paused", 150); got != 100 {
		t.Errorf("with Redis paused, %d of 150 passed a limit of 100; want 100", got)
	}
	rs.Resume(t)
	t.Logf("paused: back on Redis %v after SIGCONT", backOnRedis(t, rs, 5*time.Second))

	tr.end()
	t.Logf("traffic: %v", tr)
	if tr.failed.Load() != 0 {
		t.Fatalf("errors reached callers: %v", tr)
	}
	if s := time.Duration(tr.slowest.Load()); s > maxAnswer {
		t.Fatalf("slowest answer %v, above %v", s, maxAnswer)
	}
	if !strings.Contains(p.Log(), "store call failed") {
		t.Fatalf("the outage left no trace in the log:\n%s", p.Log())
	}
}

// TestClusterMasterKilled kills the master that serves a descriptor's key
// in a 3-master Cluster with replicas: no answer is an error, and once
// the replica is promoted the server decides on Redis again.
func TestClusterMasterKilled(t *testing.T) {
	c := redistest.StartReplicatedCluster(t, 3)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"o.yaml": outageConfig})
	p := start(t, dir, map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": strings.Join(c.Addrs(), ",")})
	clients := conns(t, 2, p.GRPC)
	awaitWindow(time.Minute, 20*time.Second)
	tr := outageTraffic(clients)
	defer tr.end()
	time.Sleep(300 * time.Millisecond)
	victim := c.MasterOf(t, "rl60s:{o|k=1}")
	replica := c.ReplicaOf(victim)
	killed := time.Now()
	victim.Kill(t)
	promoted := replica.AwaitPromotion(t, 30*time.Second)
	rc := replica.Client(t)
	before, _ := rc.Get(context.Background(), "rl60s:{o|k=1}").Int64()
	eventually(t, 10*time.Second, "the killed master's key counted again", func() bool {
		n, err := rc.Get(context.Background(), "rl60s:{o|k=1}").Int64()
		return err == nil && n > before
	})
	back := time.Now()
	tr.end()
	t.Logf("master killed; replica promoted after %v; counting on it %v after the promotion; traffic: %v",
		promoted.Sub(killed), back.Sub(promoted), tr)
	if tr.failed.Load() != 0 {
		t.Fatalf("errors reached callers: %v", tr)
	}
	if s := time.Duration(tr.slowest.Load()); s > maxAnswer {
		t.Fatalf("slowest answer %v, above %v", s, maxAnswer)
	}
}

// TestSentinelFailover kills the master behind Sentinel: no answer is an
// error, and the server follows the promoted replica by itself.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"o.yaml": outageConfig})
	p := start(t, dir, map[string]string{"REDIS_TYPE": "SENTINEL", "REDIS_URL": redistest.SentinelMaster + "," + strings.Join(s.Addrs(), ",")})
	clients := conns(t, 2, p.GRPC)
	awaitWindow(time.Minute, 25*time.Second)
	tr := outageTraffic(clients)
	defer tr.end()
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	s.Master().Kill(t)
	promoted := s.Replica().AwaitPromotion(t, 30*time.Second)
	rc := s.Replica().Client(t)
	_ = rc.FlushAll(context.Background()).Err()
	eventually(t, 15*time.Second, "counting on the promoted replica", func() bool {
		n, err := rc.DBSize(context.Background()).Result()
		return err == nil && n > 0
	})
	back := time.Now()
	tr.end()
	t.Logf("master killed; promoted after %v; counting on it %v after the promotion; traffic: %v",
		promoted.Sub(killed), back.Sub(promoted), tr)
	if tr.failed.Load() != 0 {
		t.Fatalf("errors reached callers: %v", tr)
	}
	if s := time.Duration(tr.slowest.Load()); s > maxAnswer {
		t.Fatalf("slowest answer %v, above %v", s, maxAnswer)
	}
}
