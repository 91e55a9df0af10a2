package luaproxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ratekit/ratekit/internal/luaproxy"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// recorder is a testing.TB that keeps the errors the proxy reports at its
// end, so that a test can require them.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

func start(t *testing.T) (*luaproxy.Proxy, *redis.Client) {
	t.Helper()
	srv := redistest.StartServer(t)
	p := luaproxy.Start(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

// TestScriptsRunAsOnRedis: scripts that keep the rules answer as Redis
// answers, by EVAL and EVALSHA, in pipelines, with their replies converted
// as Redis converts them, and other commands pass through.
func TestScriptsRunAsOnRedis(t *testing.T) {
	p, c := start(t)
	ctx := context.Background()
	s := redis.NewScript(`
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], 60000)
local t = redis.call('TIME')
local a, b = (table.unpack or unpack)({1, 2})
local st = redis.call('SET', KEYS[2], 'x')
local e = redis.pcall('HGET', KEYS[2], 'f')
return {n, 7 / 2, a + b, st.ok, e.err ~= nil and 1 or 0, #t, false, 'tail'}`)
	got, err := s.Run(ctx, c, []string{"k1", "k2"}, 5).Slice()
	if err != nil {
		t.Fatal(err)
	}
	// a float reply is truncated; false is a nil reply
	want := []any{int64(5), int64(3), int64(3), "OK", int64(1), int64(2), nil, "tail"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("script answered %v, want %v", got, want)
	}
	pipe := c.Pipeline()
	r1 := s.EvalSha(ctx, pipe, []string{"k1", "k3"}, 2)
	r2 := pipe.Get(ctx, "k1")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := r1.Slice(); v[0] != int64(7) {
		t.Fatalf("EVALSHA in a pipeline answered %v", v)
	}
	if r2.Val() != "7" {
		t.Fatalf("GET after the script: %q", r2.Val())
	}
	if _, err := c.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{"nokey"}).Result(); err != redis.Nil {
		t.Fatalf("a nil reply: %v, want redis.Nil", err)
	}
	if len(p.Ran()) != 2 {
		t.Fatalf("ran %d scripts, want 2", len(p.Ran()))
	}
}

// TestViolations: each rule broken fails the test that started the proxy.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unpack", `return redis.call('MGET', unpack(KEYS))`, "unpack is not in both Lua 5.1 and Lua 5.4"},
		{"table.maxn", `return table.maxn(KEYS)`, "table.maxn is not in both"},
		{"global write", `x = 1 return 1`, "may not set x"},
		{"undeclared key", `return redis.call('GET', 'other')`, `GET touches key "other", not in KEYS`},
		{"float argument", `return redis.call('PEXPIRE', KEYS[1], 3000 / 1)`, "the float 3000.0 passed to redis.call"},
		{"format of a fraction", `return string.format('%d', 7 / 2)`, "number has no integer representation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			rec := &recorder{}
			t.Run("run", func(t *testing.T) {
				// the proxy reports to rec when this subtest ends
				rec.TB = t
				p := luaproxy.Start(rec, srv.Addr())
				c := redis.NewClient(&redis.Options{Addr: p.Addr()})
				defer c.Close()
				c.Set(context.Background(), "k", "1", 0)
				_ = c.Eval(context.Background(), tc.src, []string{"k"}).Err()
			})
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.errs) == 0 || !strings.Contains(strings.Join(rec.errs, "\n"), tc.want) {
				t.Fatalf("reported %q, want a violation with %q", rec.errs, tc.want)
			}
		})
	}
}
