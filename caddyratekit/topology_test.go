package caddyratekit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/internal/redistest"
)

// redis_cluster and redis_sentinel reach a real Redis Cluster and the
// master that real Sentinels name, and hold the limit there.
func TestClusterAndSentinel(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	sentinel := redistest.StartSentinel(t)
	clusterURL := "redis://" + cluster.Addrs()[0] + "?addr=" + strings.Join(cluster.Addrs()[1:], "&addr=")
	sentinelURL := "redis://" + sentinel.Addrs()[0] + "?addr=" + strings.Join(sentinel.Addrs()[1:], "&addr=") + "&master_name=" + redistest.SentinelMaster
	for _, c := range []struct{ name, redis string }{
		{"cluster", `{"cluster_url":` + quote(clusterURL) + `}`},
		{"sentinel", `{"sentinel_url":` + quote(sentinelURL) + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := fromJSON(t, `{"redis":`+c.redis+`,"timeout":"1s","rules":[{"name":"r","limit":3,"period":3600000000000,"algorithm":"fixed"}]}`)
			provision(t, h)
			var as []answer
			for range 4 {
				as = append(as, get(t, h, "/", "198.51.100.1"))
			}
			if got, want := statuses(as), "200 200 200 429"; got != want {
				t.Errorf("statuses %s, want %s", got, want)
			}
			if as[0].placeholder("http.ratekit.degraded") != "false" {
				t.Errorf("decided without Redis")
			}
		})
	}
	// the counts are in the Cluster and on the Sentinels' master
	if n, err := cluster.Client(t).Get(context.Background(), "ratekit:r:{ip:198.51.100.1}").Int(); err != nil || n != 3 {
		t.Errorf("the Cluster's counter: %d (%v), want 3", n, err)
	}
	if n, err := sentinel.Client(t).Get(context.Background(), "ratekit:r:{ip:198.51.100.1}").Int(); err != nil || n != 3 {
		t.Errorf("the master's counter: %d (%v), want 3", n, err)
	}
}
