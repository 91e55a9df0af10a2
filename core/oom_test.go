package core_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// fill writes big keys without a TTL until Redis refuses a write for want
// of memory, or up to 64 MiB, and reports whether it refused.
func fill(t *testing.T, c *redis.Client) bool {
	t.Helper()
	big := strings.Repeat("x", 64<<10)
	for i := range 1024 {
		if err := c.Set(t.Context(), fmt.Sprintf("ballast:%d", i), big, 0).Err(); err != nil {
			if strings.HasPrefix(err.Error(), "OOM") {
				return true
			}
			t.Fatalf("filling: %v", err)
		}
	}
	return false
}

// TestOutOfMemoryIsAnOutage: with maxmemory reached under noeviction,
// every script that writes fails; the failure policy decides, the breaker
// opens, and the log says what to do in an operator's words.
func TestOutOfMemoryIsAnOutage(t *testing.T) {
	srv := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	if !fill(t, client) {
		t.Fatal("fixture: Redis never ran out of memory")
	}
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	l := newLimiter(t, testkit.MustRedis(client), core.WithLogger(logger), core.WithTimeout(10*time.Second),
		core.WithBreaker(core.BreakerConfig{Failures: 3, Backoff: time.Hour}))
	for i := range 5 {
		d, err := check(t, l, rule("r", core.PerMinute(10), fmt.Sprintf("user:%d", i)))
		if err != nil || !d.Allowed || !d.Degraded() {
			t.Fatalf("decision %d: %+v, %v; want one made locally", i, d, err)
		}
	}
	if l.BreakerState() != core.BreakerOpen {
		t.Errorf("breaker %v after 5 refused writes, want open", l.BreakerState())
	}
	if out := buf.String(); !strings.Contains(out, "Redis is out of memory") || !strings.Contains(out, "volatile-lru") {
		t.Errorf("the log does not explain the outage:\n%s", out)
	}
}

// TestEvictionForgets: under volatile-ttl (as under volatile-lru), Redis
// makes room by evicting keys with a TTL, which every ratekit key has:
// writes never fail, and a client whose key was evicted is forgiven what
// it spent.
func TestEvictionForgets(t *testing.T) {
	srv := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	// the denied-key cache would go on denying locally until the
	// retry-after: this test asks Redis
	l := newLimiter(t, testkit.MustRedis(client), core.WithTimeout(10*time.Second), core.WithDeniedCache(0))
	spent := rule("r", core.PerHour(1), "user:first")
	if d, err := check(t, l, spent); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	if d, err := check(t, l, spent); err != nil || d.Allowed {
		t.Fatalf("the second of 1 allowed: %+v, %v", d, err)
	}
	// other data with longer TTLs crowds the key out
	big := strings.Repeat("x", 64<<10)
	for i := range 1024 {
		if err := client.Set(t.Context(), fmt.Sprintf("cache:%d", i), big, 10*time.Hour).Err(); err != nil {
			t.Fatalf("a write failed under an eviction policy: %v", err)
		}
	}
	key, _ := l.StorageKey("r", "user:first")
	if n, err := client.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Fatalf("the key was not evicted: exists %d, %v", n, err)
	}
	if d, err := check(t, l, spent); err != nil || !d.Allowed || d.Degraded() {
		t.Errorf("after eviction: %+v, %v; want the client forgiven, by Redis", d, err)
	}
}
