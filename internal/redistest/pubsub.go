package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// AwaitSubscribers waits, for up to within, until the servers clients
// reach count n subscribers of channel in all (PUBSUB NUMSUB), so that a
// message published later reaches each of them; it fails tb otherwise.
// A subscription made in the background is in place once the server
// counts it.
func AwaitSubscribers(tb testing.TB, channel string, n int64, within time.Duration, clients ...*redis.Client) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		var got int64
		for _, c := range clients {
			m, err := c.PubSubNumSub(ctx, channel).Result()
			if err != nil {
				tb.Fatalf("PUBSUB NUMSUB %s: %v", channel, err)
			}
			got += m[channel]
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("%d subscribers of %s after %v, want %d", got, channel, within, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
