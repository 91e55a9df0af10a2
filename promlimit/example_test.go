package promlimit_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/promlimit"
)

// A Collector observes a Limiter and is scraped from a registry. Here three
// requests meet a limit of two a minute, and /metrics tells.
func Example() {
	collector := promlimit.MustNew()
	registry := prometheus.NewRegistry() // or prometheus.MustRegister(collector)
	registry.MustRegister(collector)

	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store, core.WithObserver(collector))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	rules := []core.Rule{{Name: "api", Limit: core.PerMinute(2), Key: keyfuncs.Static("everyone")}}
	req := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	for range 3 {
		if _, err := limiter.Check(context.Background(), req, rules); err != nil {
			log.Fatal(err)
		}
	}

	// What a scrape of /metrics shows: the decision counters that are not 0.
	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ratekit_decisions_total{") && !strings.HasSuffix(line, " 0") ||
			strings.HasPrefix(line, "ratekit_near_limit_total{") {
			fmt.Println(line)
		}
	}
	// Output:
	// ratekit_decisions_total{degraded="false",outcome="allowed",rule="api"} 2
	// ratekit_decisions_total{degraded="false",outcome="denied",rule="api"} 1
	// ratekit_near_limit_total{rule="api"} 1
}
