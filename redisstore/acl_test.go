package redisstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// aclClient makes the ACL user name, password pw, with every key and
// command and the channels of rules (none unless it says "&..."), and
// returns a client that logs in as that user.
func aclClient(t *testing.T, srv *redistest.Server, name string, rules ...string) *redis.Client {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">pw", "~*", "+@all", "resetchannels"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := srv.Client(t).Do(t.Context(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Client(t, func(o *redis.Options) { o.Username, o.Password = name, "pw" })
}

// syncBuffer is a log's output, safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestACLWithoutChannels runs a store as an ACL user without channel
// permissions, as Redis 7 makes a new user by default: a Limiter over it
// hears, through OnError and its log, that resets will not reach it; a
// Reset and an override still apply in Redis, and their errors name the
// permission.
func TestACLWithoutChannels(t *testing.T) {
	srv := redistest.StartServer(t)
	c := aclClient(t, srv, "rk")
	s := testkit.MustRedis(c)
	t.Cleanup(func() { s.Close() })
	var (
		mu       sync.Mutex
		reported []error
		log      syncBuffer
	)
	l, err := core.NewLimiter(s, core.WithLogger(slog.New(slog.NewTextHandler(&log, nil))), core.OnError(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	deadline := time.Now().Add(watchWait)
	for {
		mu.Lock()
		n := len(reported)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	if len(reported) != 1 || !errors.Is(reported[0], redisstore.ErrNoPermission) || !strings.Contains(reported[0].Error(), "&"+redisstore.ResetChannel) {
		t.Errorf("OnError heard %v, want one error wrapping ErrNoPermission that names &%s", reported, redisstore.ResetChannel)
	}
	mu.Unlock()
	if got := log.String(); !strings.Contains(got, "SUBSCRIBE") || !strings.Contains(got, "level=WARN") {
		t.Errorf("log %q, want a warning of the refused SUBSCRIBE", got)
	}

	ctx := t.Context()
	key := testkit.UniqueKey(t, "acl")
	if r, err := testkit.AllowOne(s, ctx, key, core.PerHour(3), 3); err != nil || !r.Allowed {
		t.Fatalf("spend: %+v, %v", r, err)
	}
	err = s.Reset(ctx, key)
	if !errors.Is(err, redisstore.ErrNoPermission) || !strings.Contains(err.Error(), "PUBLISH") {
		t.Errorf("Reset: %v, want an error wrapping ErrNoPermission that names PUBLISH", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("after the Reset, %s exists: %d, %v; want it deleted", key, n, err)
	}
	err = s.SetOverride(ctx, key, key+":o", core.PerHour(10), 0)
	if !errors.Is(err, redisstore.ErrNoPermission) {
		t.Errorf("SetOverride: %v, want an error wrapping ErrNoPermission", err)
	}
	if n, err := c.Exists(ctx, key+":o").Result(); err != nil || n != 1 {
		t.Errorf("after SetOverride, the override exists: %d, %v; want it set", n, err)
	}
	if err := s.ClearOverride(ctx, key, key+":o"); !errors.Is(err, redisstore.ErrNoPermission) {
		t.Errorf("ClearOverride: %v, want an error wrapping ErrNoPermission", err)
	}
}

// TestACLWithResetChannel grants the user the channel: a reset through
// one store reaches the other's watcher, and nothing is reported.
func TestACLWithResetChannel(t *testing.T) {
	srv := redistest.StartServer(t)
	c1 := aclClient(t, srv, "rk", "&"+redisstore.ResetChannel)
	c2 := srv.Client(t, func(o *redis.Options) { o.Username, o.Password = "rk", "pw" })
	a, b := testkit.MustRedis(c1), testkit.MustRedis(c2)
	t.Cleanup(func() { a.Close(); b.Close() })
	heard := make(chan string, 16)
	var reported []error
	var mu sync.Mutex
	stop, err := a.WatchResetsReporting(func(key string) { heard <- key }, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	awaitSubscribed(t, 1, srv.Client(t))
	resetAcross(t, a, b, testkit.UniqueKey(t, "acl"), heard)
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Errorf("reported %v, want nothing", reported)
	}
}
