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
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// TestOptionsValidated: each constructor refuses a nil option and a bad
// value with an error that names it. Each has an option type of its own,
// so an option meant for another does not compile.
func TestOptionsValidated(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	mem := testkit.MustMemory()
	t.Cleanup(func() { mem.Close() })
	limiter := func(opts ...core.Option) error {
		l, err := core.NewLimiter(mem, opts...)
		if err == nil {
			l.Close()
		}
		return err
	}
	memory := func(opts ...memorystore.Option) error {
		s, err := memorystore.New(opts...)
		if err == nil {
			s.Close()
		}
		return err
	}
	redisStore := func(opts ...redisstore.Option) error {
		s, err := redisstore.New(client, opts...)
		if err == nil {
			s.Close()
		}
		return err
	}
	leasing := func(opts ...leasestore.Option) error {
		s, err := leasestore.New(mem, opts...)
		if err == nil {
			s.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // a word of the error
	}{
		{"nil Limiter option", limiter(nil), "NewLimiter"},
		{"nil memory option", memory(nil), "memorystore.New"},
		{"nil redis option", redisStore(nil), "redisstore.New"},
		{"nil leasing option", leasing(nil), "leasestore.New"},
		{"MaxBatch above the cap", redisStore(redisstore.WithBatching(redisstore.Batching{MaxBatch: 5000})), "MaxBatch"},
		{"negative Parallel", redisStore(redisstore.WithBatching(redisstore.Batching{Parallel: -1})), "Parallel"},
		{"negative MaxWait", redisStore(redisstore.WithBatching(redisstore.Batching{MaxWait: -time.Millisecond})), "MaxWait"},
		{"batching with and without", redisStore(redisstore.WithBatching(redisstore.Batching{}), redisstore.WithoutBatching()), "WithoutBatching"},
		{"batching without and with", redisStore(redisstore.WithoutBatching(), redisstore.WithBatching(redisstore.Batching{})), "WithBatching"},
		{"zero max keys", memory(memorystore.WithMaxKeys(0)), "WithMaxKeys"},
		{"nil memory clock", memory(memorystore.WithClock(nil)), "WithClock"},
		{"zero lease size", leasing(leasestore.WithSize(0)), "WithSize"},
		{"zero lease hold", leasing(leasestore.WithHold(0)), "WithHold"},
		{"nil leasing clock", leasing(leasestore.WithClock(nil)), "WithClock"},
		{"nil Limiter clock", limiter(core.WithClock(nil)), "WithClock"},
		{"zero timeout", limiter(core.WithTimeout(0)), "timeout"},
		{"negative breaker failures", limiter(core.WithBreaker(core.BreakerConfig{Failures: -1})), "WithBreaker"},
		{"zero fallback keys", limiter(core.WithFallbackMaxKeys(0)), "WithFallbackMaxKeys"},
		{"a prefix with a brace", limiter(core.WithPrefix("a{b")), "prefix"},
		{"nil observer", limiter(core.WithObserver(nil)), "WithObserver"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, tc.err, tc.want)
		}
	}
	for name, err := range map[string]error{
		"Limiter": limiter(core.WithClock(time.Now), core.WithPrefix("app:"), core.WithShadow(), core.WithFallbackMaxKeys(10)),
		"memory":  memory(memorystore.WithClock(time.Now), memorystore.WithMaxKeys(10)),
		"redis":   redisStore(redisstore.WithBatching(redisstore.Batching{MaxBatch: 8})),
		"leasing": leasing(leasestore.WithSize(8), leasestore.WithHold(time.Second), leasestore.WithClock(time.Now)),
	} {
		if err != nil {
			t.Errorf("%s refused valid options: %v", name, err)
		}
	}
	if _, err := redisstore.New(nil); err == nil {
		t.Error("redisstore.New took a nil client")
	}
	if _, err := leasestore.New(nil); err == nil {
		t.Error("leasestore.New took a nil store")
	}
	if _, err := redisstore.New(testkit.ScripterOnly{Scripter: client}, redisstore.WithBatching(redisstore.Batching{})); err == nil {
		t.Error("batching accepted over a client without Pipeline")
	}
	if _, err := redisstore.New(testkit.ScripterOnly{Scripter: client}); err != nil {
		t.Errorf("the default refused a client without Pipeline: %v", err)
	}
}

// TestCheckUnvalidatedRules: a rule that NewRuleSet refuses makes Check
// return an error, never panic, and both name what is wrong with it.
func TestCheckUnvalidatedRules(t *testing.T) {
	l := newLimiter(t, testkit.MustMemory())
	id := func(core.Request) (string, error) { return "user:1", nil }
	for _, tc := range []struct {
		name string
		rule core.Rule
		want error // the sentinel the error wraps
		not  error // one it must not wrap
		text string
	}{
		{"no key function", core.Rule{Name: "r", Limit: core.PerMinute(10)}, core.ErrInvalidRule, core.ErrInvalidName, `rule "r" has no key function`},
		{"zero limit", core.Rule{Name: "r", Key: id}, core.ErrInvalidLimit, core.ErrInvalidRule, `rule "r"`},
		{"empty name", core.Rule{Limit: core.PerMinute(10), Key: id}, core.ErrInvalidName, core.ErrInvalidRule, "rule name"},
		{"brace in name", core.Rule{Name: "a{b", Limit: core.PerMinute(10), Key: id}, core.ErrInvalidName, core.ErrInvalidRule, "rule name"},
	} {
		_, err := core.NewRuleSet([]core.Rule{tc.rule})
		if !errors.Is(err, tc.want) || errors.Is(err, tc.not) || err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: NewRuleSet: %v, want an error wrapping %v (not %v) that says %q", tc.name, err, tc.want, tc.not, tc.text)
		}
		ctx := context.Background()
		d, err := l.Check(ctx, staticRequest{ctx}, []core.Rule{tc.rule})
		if err == nil || d.Allowed || !errors.Is(err, tc.want) {
			t.Errorf("%s: %+v, %v; want an error wrapping %v", tc.name, d, err, tc.want)
		}
	}
	if _, err := core.NewRuleSet(nil); !errors.Is(err, core.ErrInvalidRule) {
		t.Errorf("no rules: %v", err)
	}
	r := core.Rule{Name: "r", Limit: core.PerMinute(1), Key: id}
	if _, err := core.NewRuleSet([]core.Rule{r, r}); !errors.Is(err, core.ErrInvalidRule) {
		t.Errorf("two rules of one name: %v", err)
	}
}
