package otellimit_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/otellimit"
)

// newObserver returns an Observer on a MeterProvider of its own, and the
// manual reader that collects from it.
func newObserver(t testing.TB, opts ...otellimit.Option) (*otellimit.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	o, err := otellimit.New(append([]otellimit.Option{otellimit.WithMeterProvider(provider)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o, reader
}

// collect returns the metrics of the ratekit scope, by instrument name.
func collect(t testing.TB, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellimit.ScopeName {
			t.Errorf("metrics of scope %q", sm.Scope.Name)
			continue
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	return got
}

// points renders the data points of the named instruments one a line,
// sorted: "name{key=value,...} value" for counters and gauges,
// "name{...} count=N sum=S" for histograms.
func points(t testing.TB, reader *sdkmetric.ManualReader, names ...string) string {
	t.Helper()
	metrics := collect(t, reader)
	var lines []string
	for _, name := range names {
		switch data := metrics[name].Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range data.DataPoints {
				lines = append(lines, fmt.Sprintf("%s%s %d", name, attrs(p.Attributes), p.Value))
			}
		case metricdata.Gauge[int64]:
			for _, p := range data.DataPoints {
				lines = append(lines, fmt.Sprintf("%s%s %d", name, attrs(p.Attributes), p.Value))
			}
		case metricdata.Histogram[float64]:
			for _, p := range data.DataPoints {
				lines = append(lines, fmt.Sprintf("%s%s count=%d sum=%.6g", name, attrs(p.Attributes), p.Count, p.Sum))
			}
		case nil:
		default:
			t.Fatalf("%s: unexpected data %T", name, data)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func attrs(set attribute.Set) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range set.ToSlice() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(kv.Key) + "=" + kv.Value.String())
	}
	b.WriteByte('}')
	return b.String()
}

// expect checks that the named instruments hold the points of want, as
// points renders them; blank lines and indentation in want are ignored.
func expect(t testing.TB, reader *sdkmetric.ManualReader, want string, names ...string) {
	t.Helper()
	var lines []string
	for line := range strings.Lines(want) {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	if got, want := points(t, reader, names...), strings.Join(lines, "\n"); got != want {
		t.Errorf("data points:\n%s\nwant:\n%s", got, want)
	}
}

// histogram returns the data point of the histogram name whose attributes
// are kvs.
func histogram(t testing.TB, reader *sdkmetric.ManualReader, name string, kvs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	data, _ := collect(t, reader)[name].Data.(metricdata.Histogram[float64])
	want := attribute.NewSet(kvs...)
	for _, p := range data.DataPoints {
		if p.Attributes.Equals(&want) {
			return p
		}
	}
	t.Fatalf("no point %s%s", name, attrs(want))
	return metricdata.HistogramDataPoint[float64]{}
}

// memoryLimiter returns a Limiter over a memorystore.Store, both on clock,
// observed by o and closed when the test ends.
func memoryLimiter(t testing.TB, clock *adaptertest.Clock, o core.Observer, opts ...core.Option) *core.Limiter {
	t.Helper()
	opts = append([]core.Option{core.WithObserver(o), core.WithClock(clock.Now)}, opts...)
	return adaptertest.NewLimiterOver(t, adaptertest.NewMemoryStore(t, clock), opts...)
}

// rule returns a rule named name that limits the one identity id.
func rule(name string, limit core.Limit, id string) core.Rule {
	return core.Rule{Name: name, Limit: limit, Key: keyfuncs.Static(id)}
}

// checkN checks a request n times against rules, and returns how many of
// the decisions allowed it.
func checkN(t testing.TB, l *core.Limiter, n int, rules ...core.Rule) (allowed int) {
	t.Helper()
	for range n {
		d, err := l.Check(context.Background(), request(), rules)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	return allowed
}

// request returns a GET / request.
func request() core.Request {
	return adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
}

// decisionPoints renders the six points of ratekit.decisions for rule, as
// points does: counts holds those allowed, denied and shadow_denied, first
// by the store, then degraded.
func decisionPoints(rule string, counts [6]int) string {
	var b strings.Builder
	for i, n := range counts {
		fmt.Fprintf(&b, "ratekit.decisions{degraded=%t,outcome=%s,rule=%s} %d\n",
			i >= 3, []string{"allowed", "denied", "shadow_denied"}[i%3], rule, n)
	}
	return b.String()
}
