package core_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
)

// The stores that core's internal tests use, which they cannot import.
func init() {
	core.NewRedisStore = func(c redis.Scripter) core.Store { return testkit.MustRedis(c) }
}
