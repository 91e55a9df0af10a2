package serverproc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

// A server under a limit of 3 per minute answers 3 of 5 calls on a value
// OK and 2 OVER_LIMIT, keeps its count under Key, and is gone once
// stopped.
func TestServerDecidesAndKeepsItsKey(t *testing.T) {
	ctx := context.Background()
	bin, err := Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(Cleanup)
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	p, err := Start(Options{Bin: bin, Redis: srv.Addr, PerMinute: 3, Prefix: "test:", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = p.Stop()
		}
	})
	cs, err := Dial(p.GRPC, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var allowed, denied int
	for i := range 5 {
		ok, err := cs.Caller(i).ShouldRateLimit(ctx, "192.0.2.9")
		if err != nil {
			t.Fatalf("call %d: %v\n%s", i, err, p.Log())
		}
		if ok {
			allowed++
		} else {
			denied++
		}
	}
	if allowed != 3 || denied != 2 {
		t.Errorf("%d allowed, %d denied; want 3, 2", allowed, denied)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := Key("test:", "192.0.2.9")
	found := false
	for _, k := range keys {
		found = found || strings.HasPrefix(k, want)
	}
	if !found {
		t.Errorf("no key starting %q among %q", want, keys)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if _, err := cs.Caller(0).ShouldRateLimit(ctx, "192.0.2.9"); err == nil {
		t.Error("a stopped server answered")
	}
}
