package inflight_test

import (
	"errors"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// The options only rate limits have are refused, not silently ignored.
func TestGuardRefusesRateOptions(t *testing.T) {
	l, _ := newLimiter(t)
	rule := inflight.Rule{Name: "exports", Limit: 2, Key: func(core.Request) (string, error) { return "ip:192.0.2.1", nil }}
	set, err := core.NewRuleSet([]core.Rule{{Name: "default", Limit: core.PerMinute(10), Key: rule.Key}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]adapter.Config{
		"a rule set": {Rules: set},
		"count-only": {CountOnly: map[string]func(int) bool{"exports": func(int) bool { return true }}},
	} {
		if _, err := inflight.NewGuard(l, rule, cfg); !errors.Is(err, adapter.ErrOptionMismatch) {
			t.Errorf("%s: %v, want ErrOptionMismatch", name, err)
		}
	}
	if _, err := inflight.NewGuard(l, rule, adapter.Config{}); err != nil {
		t.Errorf("a plain config: %v", err)
	}
}

// NewGuard's errors name it.
func TestNewGuardErrors(t *testing.T) {
	if _, err := inflight.NewGuard(nil, inflight.Rule{}, adapter.Config{}); err == nil || err.Error() != "inflight.NewGuard: nil Limiter" {
		t.Errorf("nil Limiter: %v, want inflight.NewGuard: nil Limiter", err)
	}
}
