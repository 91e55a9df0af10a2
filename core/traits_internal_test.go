package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestTraitsKeepsDeadlines(t *testing.T) {
	honours := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	ignores := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	for _, c := range []interface{ Close() error }{honours, ignores, cluster, ring} {
		t.Cleanup(func() { c.Close() })
	}
	batched := MustRedisStore(honours, WithBatching(Batching{}))
	t.Cleanup(func() { batched.Close() })
	for _, tc := range []struct {
		name  string
		store Store
		want  bool
	}{
		{"client with ContextTimeoutEnabled", MustRedisStore(honours), true},
		{"default client", MustRedisStore(ignores), false},
		{"cluster", MustRedisStore(cluster), true},
		{"ring", MustRedisStore(ring), true},
		{"batching", batched, true},
		{"leasing", MustLeasingStore(MustRedisStore(honours)), true},
		{"leasing over a default client", MustLeasingStore(MustRedisStore(ignores)), false},
		{"memory", MustMemoryStore(), false},
	} {
		if got := TraitsOf(tc.store).KeepsDeadlines; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBatchingByDefault: a RedisStore batches over a *redis.Client unless
// told not to, and over a Cluster or Ring client, or one without
// Pipeline, only when told to.
func TestBatchingByDefault(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	for _, c := range []interface{ Close() error }{plain, cluster, ring} {
		t.Cleanup(func() { c.Close() })
	}
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		opts   []Option
		want   bool
	}{
		{"client", plain, nil, true},
		{"client, WithoutBatching", plain, []Option{WithoutBatching()}, false},
		{"client, WithBatching", plain, []Option{WithBatching(Batching{MaxBatch: 8})}, true},
		{"cluster", cluster, nil, false},
		{"cluster, WithBatching", cluster, []Option{WithBatching(Batching{})}, true},
		{"ring", ring, nil, false},
		{"ring, WithBatching", ring, []Option{WithBatching(Batching{})}, true},
		{"scripter without Pipeline", scriptsOnly{plain}, nil, false},
	} {
		s := MustRedisStore(tc.client, tc.opts...)
		if got := s.batch != nil; got != tc.want {
			t.Errorf("%s: batching %v, want %v", tc.name, got, tc.want)
		}
		if s.batch != nil && (s.batch.maxBatch < 1 || s.batch.parallel < 1) {
			t.Errorf("%s: batching with MaxBatch %d, Parallel %d", tc.name, s.batch.maxBatch, s.batch.parallel)
		}
		s.Close()
	}
}

// scriptsOnly hides every method of a client but those of redis.Scripter.
type scriptsOnly struct{ redis.Scripter }

// panicHook makes every script call of a client panic; other commands,
// such as the reset watch's subscription on a goroutine of go-redis's
// own, where a panic would end the test binary, pass.
type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			panic("hook: boom")
		}
		return next(ctx, cmd)
	}
}
func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestDirectCallPanicIsAFailure: a store called on the request's goroutine
// that panics fails the call, and the failure policy decides.
func TestDirectCallPanicIsAFailure(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	c.AddHook(panicHook{})
	var failures []error
	l, err := NewLimiter(MustRedisStore(c), OnError(func(err error) { failures = append(failures, err) }), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.direct {
		t.Fatal("fixture: the store is not called directly")
	}
	d, err := l.Check(context.Background(), emptyRequest{}, []Rule{{Name: "r", Limit: PerMinute(10), Key: func(Request) (string, error) { return "user:1", nil }}})
	if err != nil || !d.Allowed || !d.Degraded() {
		t.Fatalf("decision %+v, %v: want allowed locally", d, err)
	}
	if len(failures) != 1 || !strings.Contains(failures[0].Error(), "store panicked: hook: boom") {
		t.Fatalf("failures %v, want the panic", failures)
	}
}
