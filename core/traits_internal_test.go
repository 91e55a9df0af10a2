package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

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
	l, err := NewLimiter(NewRedisStore(c), OnError(func(err error) { failures = append(failures, err) }), WithTimeout(time.Second))
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
