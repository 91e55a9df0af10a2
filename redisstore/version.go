package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrServerTooOld is returned, wrapped, by [New] when the server reports a
// version older than Redis 6.2, whose SET ... PXAT the scripts use.
// Valkey reports a redis_version of 7.2.4 and passes.
var ErrServerTooOld = errors.New("ratekit: the Redis server is older than 6.2")

// minVersion is the oldest server the scripts run on: SET ... PXAT came
// with Redis 6.2.
var minVersion = [2]int{6, 2}

// versionCheckTimeout bounds New's INFO call: a server that does not
// answer by then is not checked, and the first decisions find out.
const versionCheckTimeout = time.Second

// infoer is a client that can ask INFO: *redis.Client, *redis.ClusterClient
// (a random master) and *redis.Ring (a random server) have it.
type infoer interface {
	Info(ctx context.Context, sections ...string) *redis.StringCmd
}

// checkVersion asks the server INFO server and returns an error wrapping
// ErrServerTooOld when its redis_version is older than minVersion. A
// client without Info, a server that does not answer in time, refuses
// INFO (an ACL user without it) or reports no version (miniredis) is not
// checked: only a server that says it is too old is refused.
func checkVersion(client redis.Scripter) (err error) {
	defer func() {
		// a client's hook that panics leaves the server unchecked, as a
		// store call turns such a panic into an error
		if recover() != nil {
			err = nil
		}
	}()
	c, ok := client.(infoer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionCheckTimeout)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return nil
	}
	v, ok := redisVersion(info)
	if !ok || v[0] > minVersion[0] || v[0] == minVersion[0] && v[1] >= minVersion[1] {
		return nil
	}
	return fmt.Errorf("%w: it reports redis_version %d.%d, and the scripts use SET ... PXAT, which came with 6.2", ErrServerTooOld, v[0], v[1])
}

// redisVersion reads the major and minor version of INFO server's
// redis_version field.
func redisVersion(info string) ([2]int, bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_version:")
		if !ok {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			return [2]int{}, false
		}
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			return [2]int{}, false
		}
		return [2]int{major, minor}, true
	}
	return [2]int{}, false
}
