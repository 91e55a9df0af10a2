package outbound_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/outbound"
)

// TestACLWithoutPauseChannel runs a Limiter as an ACL user without
// channel permissions, as Redis 7 makes a new user by default: OnError
// hears that the subscription to pauses was refused, and a Pause's error
// names the channel to grant. With the channel granted, and as the user
// that the ACL line of docs/acl.md makes, nothing is reported and a Pause
// succeeds.
func TestACLWithoutPauseChannel(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := srv.Client(t)
	user := func(grant string) func(t *testing.T) func(*redis.Options) {
		return func(t *testing.T) func(*redis.Options) {
			args := []any{"ACL", "SETUSER", "rk", "reset", "on", ">pw", "~*", "+@all", "resetchannels"}
			if grant != "" {
				args = append(args, grant)
			}
			if err := admin.Do(t.Context(), args...).Err(); err != nil {
				t.Fatal(err)
			}
			return redistest.LoginAs("rk", "pw")
		}
	}
	docsUser := func(t *testing.T) func(*redis.Options) { return redistest.LoginAs(redistest.ApplyDocsACL(t, srv)) }
	for _, tc := range []struct {
		name    string
		granted bool
		login   func(t *testing.T) func(*redis.Options)
	}{{"without", false, user("")}, {"with", true, user("&ratekit:outbound:*")}, {"docs", true, docsUser}} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.Client(t, tc.login(t))
			var (
				mu       sync.Mutex
				reported []error
			)
			l, err := outbound.New(c, "upstream-"+tc.name, outbound.PerSecond(10), outbound.OnError(func(err error) {
				mu.Lock()
				defer mu.Unlock()
				reported = append(reported, err)
			}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if tc.granted {
				redistest.AwaitSubscribers(t, "ratekit:outbound:upstream-"+tc.name+":pauses", 1, 20*time.Second, admin)
				if err := l.Pause(t.Context(), "k", time.Second); err != nil {
					t.Errorf("Pause: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(reported) != 0 {
					t.Errorf("reported %v, want nothing", reported)
				}
				return
			}
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				n := len(reported)
				mu.Unlock()
				if n > 0 {
					break
				}
			}
			mu.Lock()
			if len(reported) == 0 || !errors.Is(reported[0], outbound.ErrNoPermission) || !strings.Contains(reported[0].Error(), "SUBSCRIBE") {
				t.Errorf("OnError heard %v, want the refused SUBSCRIBE, wrapping ErrNoPermission", reported)
			}
			mu.Unlock()
			err = l.Pause(t.Context(), "k", time.Second)
			if !errors.Is(err, outbound.ErrNoPermission) || !strings.Contains(err.Error(), "&ratekit:outbound:upstream-without:pauses") {
				t.Errorf("Pause: %v, want an error wrapping ErrNoPermission that names the channel", err)
			}
		})
	}
}
