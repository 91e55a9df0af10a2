package promlimit_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratekit/ratekit/internal/outboundkit"
	"github.com/ratekit/ratekit/promlimit"
)

// TestOutbound: the outbound metrics after known waits and a 429.
func TestOutbound(t *testing.T) {
	c, err := promlimit.NewOutbound(promlimit.WithConstLabels(map[string]string{"app": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	outboundkit.OutboundTraffic(t, c)
	want := `
# HELP ratekit_outbound_pauses_total Pauses this process set for the whole fleet, by reason.
# TYPE ratekit_outbound_pauses_total counter
ratekit_outbound_pauses_total{app="t",limiter="api",reason="retry_after"} 1
# HELP ratekit_outbound_paused_seconds_total Seconds of the pauses this process set for the whole fleet, by reason.
# TYPE ratekit_outbound_paused_seconds_total counter
ratekit_outbound_paused_seconds_total{app="t",limiter="api",reason="retry_after"} 2
# HELP ratekit_outbound_throttled_total Answers of the upstream refusing a request, by status (429, 503).
# TYPE ratekit_outbound_throttled_total counter
ratekit_outbound_throttled_total{app="t",limiter="api",status="429"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"ratekit_outbound_pauses_total", "ratekit_outbound_paused_seconds_total", "ratekit_outbound_throttled_total"); err != nil {
		t.Error(err)
	}
	// three waits and the Transport's one, granted
	if n := testutil.CollectAndCount(c, "ratekit_outbound_wait_seconds"); n != 1 {
		t.Errorf("%d wait series, want 1", n)
	}
	if got := histogramCount(t, c, "ratekit_outbound_wait_seconds"); got != 4 {
		t.Errorf("%d waits observed, want 4", got)
	}
	if _, err := promlimit.NewOutbound(promlimit.WithMaxRules(3)); err == nil {
		t.Error("NewOutbound took WithMaxRules")
	}
}

// histogramCount returns the summed sample count of the histogram name.
func histogramCount(t *testing.T, c prometheus.Collector, name string) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
