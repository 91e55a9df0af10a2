package envoytest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
)

// series reads the envoy series of a Prometheus endpoint: name{labels}
// → value, empty labels dropped (Prometheus reads them as absent).
func series(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	_, body, err := proctest.Get(addr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "ratelimit_service_") || strings.HasPrefix(name, "ratelimit_service_response_time") {
			continue
		}
		for _, m := range f.Metric {
			var ls []string
			for _, l := range m.Label {
				if l.GetValue() != "" {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue()
			if m.Gauge != nil {
				v = m.GetGauge().GetValue()
			}
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// metricsConfig names statistics by the descriptors' own values.
const metricsConfig = `
domain: metrics
descriptors:
  - key: d
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: v
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: w
    value: "ab*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: s
    value: "x*"
    share_threshold: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: n
    value_to_metric: true
    descriptors:
      - key: m
        rate_limit: {unit: minute, requests_per_unit: 2}
`

// TestComparePrometheus sends both servers the same requests and compares
// their envoy series: names, labels and values.
func TestComparePrometheus(t *testing.T) {
	p := startPair(t, map[string]string{"shop.yaml": mainConfig, "metrics.yaml": metricsConfig}, map[string]string{"USE_PROMETHEUS": "true", "STATS_FLUSH_INTERVAL": "100ms"})
	awaitWindow(10 * time.Second)
	for i := range 6 {
		p.compare(t, fmt.Sprint("request ", i), req("shop", desc("path", "/checkout"), desc("path", "/x"), desc("shadow", "s"), desc("quota", "q"), desc("ip", "10.1.2.3")))
		p.compare(t, fmt.Sprint("hits ", i), req("shop", hits(desc("file", "img/a"), 2)))
		p.compare(t, fmt.Sprint("nested ", i), req("shop", desc("user", "u1", "plan", "free"), desc("user", "u2", "plan", "vip")))
	}
	for _, v := range []string{"one", "two", "10.0.0.7"} {
		p.compare(t, "metrics "+v, req("metrics", desc("d", v), desc("v", v), desc("w", "ab"+v), desc("s", "x"+v), desc("n", v, "m", v), desc("n", v, "m", v, "o", v)))
	}
	p.compare(t, "error", req("", desc("path", "/x")))
	var e, r map[string]float64
	eventually := time.Now().Add(5 * time.Second)
	for {
		e, r = series(t, p.envoy.Prom), series(t, p.ratekit.Prom)
		if reflect.DeepEqual(e, r) || time.Now().After(eventually) {
			break
		}
		time.Sleep(200 * time.Millisecond) // envoy flushes its statistics every 100 ms
	}
	if !reflect.DeepEqual(e, r) {
		t.Fatalf("series differ:\nenvoy:   %s\nratekit: %s", dump(e), dump(r))
	}
	t.Logf("%d series alike: %s", len(e), dump(e))
}

func dump(m map[string]float64) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s %v", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, "\n  ")
}
