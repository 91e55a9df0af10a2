package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
)

// TestLimitsTheScriptsCannotHonour: a GCRA limit that would space units
// less than a microsecond apart, and a sliding log above its cap, are
// refused by name; so is a sliding-log cost above MaxLogCost, while a cost
// above the rate is still denied as never allowable.
func TestLimitsTheScriptsCannotHonour(t *testing.T) {
	for _, bad := range []core.Limit{
		core.PerSecond(2_000_000),
		{Rate: core.MaxRate, Period: time.Millisecond, Burst: 1},
		core.PerMinute(core.MaxLogRate + 1).WithAlgorithm(core.SlidingWindowLog),
	} {
		err := bad.Validate()
		if !errors.Is(err, core.ErrInvalidLimit) || !strings.Contains(err.Error(), bad.String()) {
			t.Errorf("%v: %v, want an error naming the limit", bad, err)
		}
	}
	for _, good := range []core.Limit{
		core.PerSecond(1_000_000), // one unit per µs
		core.PerHour(core.MaxRate),
		core.PerMinute(core.MaxLogRate).WithAlgorithm(core.SlidingWindowLog),
		core.PerSecond(2_000_000).WithAlgorithm(core.FixedWindow), // counts, spaces nothing
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%v: %v", good, err)
		}
	}
	s := testkit.MustMemory()
	defer s.Close()
	log := []core.Check{{Key: "rk:l:{user:1}", Limit: core.PerMinute(1000).WithAlgorithm(core.SlidingWindowLog)}}
	if _, err := s.AllowAllN(context.Background(), log, core.MaxLogCost+1); !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("a sliding-log cost above MaxLogCost: %v, want ErrInvalidCost", err)
	}
	res, err := s.AllowAllN(context.Background(), log, 1001)
	if err != nil || !res[0].Never() {
		t.Errorf("a cost above the rate: %+v, %v; want never allowed", res, err)
	}
	if res, err := s.AllowAllN(context.Background(), log, core.MaxLogCost); err != nil || !res[0].Allowed {
		t.Errorf("a cost of MaxLogCost: %+v, %v; want allowed", res, err)
	}
}
