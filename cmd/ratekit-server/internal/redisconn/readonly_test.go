package redisconn_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/redisconn"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestReadOnlyCountedAndClosed: READONLY replies, to a command or in a
// pipeline, are counted, and the connection that got one is closed.
func TestReadOnlyCountedAndClosed(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	// a replica of a master that is not there: up, and read-only
	if err := rs.Client(t).ReplicaOf(context.Background(), "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisconn.Open(set(t, "REDIS_SOCKET_TYPE", "tcp", "REDIS_URL", rs.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	s.OnReadOnly(func() { n.Add(1) })
	ctx := context.Background()
	if err := s.Client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := s.Client.PoolStats().TotalConns; got != 1 {
		t.Fatalf("%d connections after a PING", got)
	}
	err = s.Client.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"k"}).Err()
	if !redis.HasErrorPrefix(err, "READONLY") {
		t.Fatalf("a script's write on a replica: %v", err)
	}
	if got := s.Client.PoolStats().TotalConns; got != 0 {
		t.Fatalf("%d connections kept after READONLY; want it closed", got)
	}
	_, _ = s.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "a")
		p.Get(ctx, "a")
		p.Incr(ctx, "b")
		return nil
	})
	if got := n.Load(); got != 3 {
		t.Fatalf("%d READONLY replies counted, want 3 (one command, two of a pipeline)", got)
	}
}
