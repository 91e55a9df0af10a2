package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// TestOptionsValidated: every constructor refuses an option meant for
// another, a nil option and a bad value, with an error that names it.
func TestOptionsValidated(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	mem := core.MustMemoryStore()
	t.Cleanup(func() { mem.Close() })
	build := map[string]func(opts ...core.Option) error{
		"Limiter": func(opts ...core.Option) error {
			l, err := core.NewLimiter(mem, opts...)
			if err == nil {
				l.Close()
			}
			return err
		},
		"MemoryStore": func(opts ...core.Option) error {
			s, err := core.NewMemoryStore(opts...)
			if err == nil {
				s.Close()
			}
			return err
		},
		"RedisStore": func(opts ...core.Option) error {
			s, err := core.NewRedisStore(client, opts...)
			if err == nil {
				s.Close()
			}
			return err
		},
		"LeasingStore": func(opts ...core.Option) error {
			s, err := core.NewLeasingStore(mem, opts...)
			if err == nil {
				s.Close()
			}
			return err
		},
	}
	for _, tc := range []struct {
		what   string
		opt    core.Option
		for_   string // the only constructors that accept it, comma-separated
		wantIn string // a word of the error elsewhere
	}{
		{"WithBatching", core.WithBatching(core.Batching{}), "RedisStore", "WithBatching"},
		{"WithoutBatching", core.WithoutBatching(), "RedisStore", "WithoutBatching"},
		{"WithMaxKeys", core.WithMaxKeys(10), "MemoryStore", "WithMaxKeys"},
		{"WithLeaseSize", core.WithLeaseSize(8), "LeasingStore", "WithLeaseSize"},
		{"WithLeaseHold", core.WithLeaseHold(time.Second), "LeasingStore", "WithLeaseHold"},
		{"WithClock", core.WithClock(time.Now), "Limiter,MemoryStore,LeasingStore", "WithClock"},
		{"WithPrefix", core.WithPrefix("app:"), "Limiter", "WithPrefix"},
		{"WithTimeout", core.WithTimeout(time.Second), "Limiter", "WithTimeout"},
		{"WithBreaker", core.WithBreaker(core.BreakerConfig{}), "Limiter", "WithBreaker"},
		{"WithShadow", core.WithShadow(), "Limiter", "WithShadow"},
	} {
		for name, b := range build {
			err := b(tc.opt)
			if strings.Contains(tc.for_, name) {
				if err != nil {
					t.Errorf("%s on %s: %v", tc.what, name, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantIn) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s on %s: error %v, want one naming both", tc.what, name, err)
			}
		}
	}
	for name, b := range build {
		if err := b(nil); err == nil {
			t.Errorf("%s took a nil option", name)
		}
	}
	for _, bad := range []struct {
		name string
		err  error
	}{
		{"MaxBatch above the cap", build["RedisStore"](core.WithBatching(core.Batching{MaxBatch: 5000}))},
		{"negative Parallel", build["RedisStore"](core.WithBatching(core.Batching{Parallel: -1}))},
		{"negative MaxWait", build["RedisStore"](core.WithBatching(core.Batching{MaxWait: -time.Millisecond}))},
		{"zero max keys", build["MemoryStore"](core.WithMaxKeys(0))},
		{"zero lease size", build["LeasingStore"](core.WithLeaseSize(0))},
		{"zero lease hold", build["LeasingStore"](core.WithLeaseHold(0))},
		{"nil clock", build["MemoryStore"](core.WithClock(nil))},
		{"zero timeout", build["Limiter"](core.WithTimeout(0))},
		{"negative breaker failures", build["Limiter"](core.WithBreaker(core.BreakerConfig{Failures: -1}))},
		{"a fallback option for another store", build["Limiter"](core.WithFallbackOptions(core.WithBatching(core.Batching{})))},
		{"a prefix with a brace", build["Limiter"](core.WithPrefix("a{b"))},
		{"batching with and without", build["RedisStore"](core.WithBatching(core.Batching{}), core.WithoutBatching())},
		{"batching without and with", build["RedisStore"](core.WithoutBatching(), core.WithBatching(core.Batching{}))},
	} {
		if bad.err == nil {
			t.Errorf("%s accepted", bad.name)
		}
	}
	if _, err := core.NewRedisStore(nil); err == nil {
		t.Error("NewRedisStore took a nil client")
	}
	if _, err := core.NewLeasingStore(nil); err == nil {
		t.Error("NewLeasingStore took a nil store")
	}
	if _, err := core.NewRedisStore(scripterOnly{client}, core.WithBatching(core.Batching{})); err == nil {
		t.Error("batching accepted over a client without Pipeline")
	}
	if _, err := core.NewRedisStore(scripterOnly{client}); err != nil {
		t.Errorf("the default refused a client without Pipeline: %v", err)
	}
}

// TestCheckUnvalidatedRules: a rule that ValidateRules would refuse makes
// Check return an error, never panic.
func TestCheckUnvalidatedRules(t *testing.T) {
	l := newLimiter(t, core.MustMemoryStore())
	id := func(core.Request) (string, error) { return "user:1", nil }
	for name, r := range map[string]core.Rule{
		"no key function": {Name: "r", Limit: core.PerMinute(10)},
		"zero limit":      {Name: "r", Key: id},
		"empty name":      {Limit: core.PerMinute(10), Key: id},
		"brace in name":   {Name: "a{b", Limit: core.PerMinute(10), Key: id},
	} {
		if err := core.ValidateRules([]core.Rule{r}); err == nil {
			t.Fatalf("%s: ValidateRules accepts it", name)
		}
		ctx := context.Background()
		d, err := l.Check(ctx, staticRequest{ctx}, []core.Rule{r})
		if err == nil || d.Allowed {
			t.Errorf("%s: %+v, %v; want an error", name, d, err)
		}
	}
	if err := core.ValidateRules(nil); err == nil {
		t.Error("ValidateRules accepts no rules")
	}
	r := core.Rule{Name: "r", Limit: core.PerMinute(1), Key: id}
	if err := core.ValidateRules([]core.Rule{r, r}); err == nil || !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("two rules of one name: %v", err)
	}
}
