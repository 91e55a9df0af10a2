package stats

import (
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/statsd_exporter/pkg/mapper"
)

// LoadMapper reads a statsd_exporter mapping file (PROMETHEUS_MAPPER_YAML).
func LoadMapper(path string) (*mapper.MetricMapper, error) {
	m := &mapper.MetricMapper{}
	if err := m.InitFromFile(path); err != nil {
		return nil, fmt.Errorf("PROMETHEUS_MAPPER_YAML=%q: %w", path, err)
	}
	return m, nil
}

// MappedCollector exports s as envoy's Prometheus sink does with
// PROMETHEUS_MAPPER_YAML: each statistic under its statsd name
// (ratelimit.service.rate_limit.DOMAIN.KEY.total_hits, ...) goes through
// m's mappings, which name it, label it or drop it; one no mapping matches
// is exported under its escaped statsd name. Series of one name that the
// mappings give different labels are exported with the union of them, the
// missing ones empty (which Prometheus reads as absent). The response time
// is the histogram of seconds under the name its mapping gives.
func (s *Stats) MappedCollector(m *mapper.MetricMapper) prometheus.Collector {
	return mapped{s: s, m: m}
}

type mapped struct {
	s *Stats
	m *mapper.MetricMapper
}

// Describe describes nothing: the series are the mappings'.
func (mapped) Describe(chan<- *prometheus.Desc) {}

func (c mapped) Collect(ch chan<- prometheus.Metric) {
	type series struct {
		labels map[string]string
		value  float64
	}
	families := map[string]map[string]*series{} // name → label values → series
	labelNames := map[string]map[string]bool{}
	add := func(statsdName string, v uint64) {
		if v == 0 {
			return
		}
		name, labels, ok := c.mapName(statsdName, mapper.MetricTypeCounter)
		if !ok {
			return
		}
		if families[name] == nil {
			families[name], labelNames[name] = map[string]*series{}, map[string]bool{}
		}
		for k := range labels {
			labelNames[name][k] = true
		}
		id := fmt.Sprint(sortedPairs(labels))
		if sr := families[name][id]; sr != nil {
			sr.value += float64(v)
			return
		}
		families[name][id] = &series{labels: labels, value: float64(v)}
	}
	s := c.s
	s.each(func(r *Rule) {
		for _, n := range r.counters() {
			add("ratelimit.service.rate_limit."+r.Key+"."+n.suffix, n.c.Value())
		}
	})
	add("ratelimit.service.config_load_success", s.ConfigLoadSuccess.Value())
	add("ratelimit.service.config_load_error", s.ConfigLoadError.Value())
	add("ratelimit.service.global_shadow_mode", s.GlobalShadowMode.Value())
	add("ratelimit.service.call.should_rate_limit.service_error", s.ServiceError.Value())
	add("ratelimit.service.call.should_rate_limit.redis_error", s.RedisError.Value())
	add("ratelimit_server.ShouldRateLimit.total_requests", s.TotalRequests.Value())
	add("ratelimit.redis_pool.readonly_error", s.RedisReadOnly.Value())
	for name, fam := range families {
		names := make([]string, 0, len(labelNames[name]))
		for k := range labelNames[name] {
			names = append(names, k)
		}
		sort.Strings(names)
		desc := prometheus.NewDesc(name, help, names, nil)
		for _, sr := range fam {
			values := make([]string, len(names))
			for i, k := range names {
				values[i] = sr.labels[k]
			}
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, sr.value, values...)
		}
	}
	c.collectResponseTime(ch)
}

// collectResponseTime exports the response time histogram under the name
// and labels its statsd timer is mapped to.
func (c mapped) collectResponseTime(ch chan<- prometheus.Metric) {
	h := &c.s.responseTime
	var total uint64
	buckets := make(map[float64]uint64, len(h.bounds))
	for i, b := range h.bounds {
		total += h.counts[i].Load()
		buckets[b] = total
	}
	total += h.counts[len(h.bounds)].Load()
	if total == 0 {
		return
	}
	name, labels, ok := c.mapName("ratelimit_server.ShouldRateLimit.response_time", mapper.MetricTypeObserver)
	if !ok {
		return
	}
	pairs := sortedPairs(labels)
	names, values := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		names[i], values[i] = p[0], p[1]
	}
	h.sumMu.Lock()
	sum := h.sum
	h.sumMu.Unlock()
	ch <- prometheus.MustNewConstHistogram(prometheus.NewDesc(name, help, names, nil), total, sum, buckets, values...)
}

// mapName maps a statsd name: the mapping's name and labels, the escaped
// name without labels when none matches, and false when it is dropped.
func (c mapped) mapName(statsdName string, t mapper.MetricType) (string, map[string]string, bool) {
	m, labels, present := c.m.GetMapping(statsdName, t)
	if !present {
		return mapper.EscapeMetricName(statsdName), nil, true
	}
	if m.Action == mapper.ActionTypeDrop {
		return "", nil, false
	}
	return m.Name, labels, true
}

func sortedPairs(labels map[string]string) [][2]string {
	out := make([][2]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
