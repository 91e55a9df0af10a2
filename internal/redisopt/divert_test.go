package redisopt_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redisopt"
)

func TestDivertOf(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cases := []struct {
		name   string
		client redis.Scripter
		want   bool
	}{
		{"client, defaults", plain, true},
		{"client, no timeouts", redis.NewClient(&redis.Options{ReadTimeout: -1, WriteTimeout: -1}), true},
		{"client, no socket deadlines", redis.NewClient(&redis.Options{ReadTimeout: -2}), false},
		{"client, ContextTimeoutEnabled", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true}), false},
		{"cluster, defaults", redis.NewClusterClient(&redis.ClusterOptions{}), false},
		{"ring, defaults", redis.NewRing(&redis.RingOptions{}), false},
		{"a client of another kind", scripter{}, false},
	}
	for _, c := range cases {
		if got := redisopt.DivertOf(c.client) != nil; got != c.want {
			t.Errorf("%s: a Divert: %v, want %v", c.name, got, c.want)
		}
		if closer, ok := c.client.(interface{ Close() error }); ok {
			closer.Close()
		}
	}
	a, b := redisopt.DivertOf(plain), redisopt.DivertOf(plain)
	if a != b {
		t.Errorf("two Diverts for one client")
	}
}

// A marked call through a client of hour-long timeouts returns by its
// context's deadline when the server stalls on a connection it has
// answered before: a command, a pipeline, and with the context held in a
// Marked.
func TestDivertKeepsDeadlines(t *testing.T) {
	mr := miniredis.RunT(t)
	proxy := netfault.Start(t, mr.Addr())
	client := redis.NewClient(&redis.Options{
		Addr: proxy.Addr(), ReadTimeout: time.Hour, WriteTimeout: time.Hour, MaxRetries: -1, PoolSize: 1,
	})
	t.Cleanup(func() { client.Close() })
	d := redisopt.DivertOf(client)
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"command", func(ctx context.Context) error { return client.Ping(d.Mark(ctx)).Err() }},
		{"pipeline", func(ctx context.Context) error {
			ctx = d.Mark(ctx)
			p := client.Pipeline()
			p.Ping(ctx)
			p.Ping(ctx)
			_, err := p.Exec(ctx)
			return err
		}},
		{"Marked", func(ctx context.Context) error {
			var m redisopt.Marked
			return client.Ping(m.Set(d, ctx)).Err()
		}},
	}
	stall := netfault.Latency(time.Hour, 0)
	for _, c := range calls {
		// the connection is open and answered, then the server stalls
		if err := c.call(context.Background()); err != nil {
			t.Fatalf("%s before the stall: %v", c.name, err)
		}
		proxy.Inject(t, stall)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- c.call(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: %v, want a deadline error", c.name, err)
			}
		case <-time.After(time.Minute):
			// the client's own timeouts are an hour
			t.Fatalf("%s: still waiting a minute past its 20ms deadline", c.name)
		}
		cancel()
		proxy.Lift(t, stall)
	}
}

// countHook counts the commands and pipelines it sees.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// A marked call runs the hooks the client had when its Divert was made,
// and answers as the client would; a hook added later sees unmarked calls
// only. A transaction, marked or not, goes on unchanged.
func TestDivertRunsHooks(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	var before, after atomic.Int64
	client.AddHook(countHook{&before})
	d := redisopt.DivertOf(client)
	client.AddHook(countHook{&after})
	ctx := d.Mark(context.Background())

	if n, err := client.Incr(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("marked INCR: %d, %v", n, err)
	}
	p := client.Pipeline()
	incr := p.Incr(ctx, "k")
	if _, err := p.Exec(ctx); err != nil || incr.Val() != 2 {
		t.Fatalf("marked pipeline: %d, %v", incr.Val(), err)
	}
	if before.Load() != 2 || after.Load() != 0 {
		t.Errorf("marked calls: the hook from before saw %d, the one from after %d; want 2 and 0", before.Load(), after.Load())
	}
	var tx *redis.IntCmd
	if _, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tx = p.Incr(ctx, "k")
		return nil
	}); err != nil || tx.Val() != 3 {
		t.Fatalf("marked transaction: %d, %v", tx.Val(), err)
	}
	if n, err := client.Incr(context.Background(), "k").Result(); err != nil || n != 4 {
		t.Fatalf("unmarked INCR: %d, %v", n, err)
	}
	if before.Load() != 4 || after.Load() != 2 {
		t.Errorf("with the transaction and an unmarked call: %d and %d, want 4 and 2", before.Load(), after.Load())
	}
}
