package redistest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReplicatedCluster starts a Cluster of 3 masters with a replica each,
// kills the master of a key, and checks that its replica is promoted,
// serves the key's slot, and kept the key.
func TestReplicatedCluster(t *testing.T) {
	start := time.Now()
	cl := StartReplicatedCluster(t, 3)
	t.Logf("cluster %v ready in %v", cl.Addrs(), time.Since(start))
	if got := len(cl.Servers()); got != 6 {
		t.Fatalf("Servers() has %d nodes, want 6", got)
	}
	ctx := context.Background()
	cc := cl.Client(t)
	for i := range 30 {
		if err := cc.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key:%d: %v", i, err)
		}
	}
	masters := cl.Servers()[:3]
	for _, m := range masters {
		r := cl.ReplicaOf(m)
		if r == nil || slices.Contains(masters, r) {
			t.Fatalf("ReplicaOf(%s) = %v, want one of the replicas", m.Addr(), r)
		}
		if role := roleOf(t, r); role != "slave" {
			t.Errorf("%s: role %q, want slave", r.Addr(), role)
		}
	}
	if cl.ReplicaOf(cl.Servers()[3]) != nil {
		t.Error("a replica has a replica")
	}

	m := cl.MasterOf(t, "key:7")
	if !slices.Contains(masters, m) {
		t.Fatalf("MasterOf(key:7) = %s, not a master", m.Addr())
	}
	r := cl.ReplicaOf(m)
	// replication is asynchronous: the key must reach the replica before
	// its master dies, or the promoted replica rightly lacks it
	if n, err := m.Client(t).Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica of %s: %d replicas, %v", m.Addr(), n, err)
	}
	m.Kill(t)
	killed := time.Now()
	promoted := r.AwaitPromotion(t, 20*time.Second)
	t.Logf("replica %s promoted %v after its master was killed", r.Addr(), promoted.Sub(killed))
	// the promoted replica serves the slot by its own view at once; the
	// other nodes learn it by gossip, which a loaded machine can hold up
	waitUntil(t, 10*time.Second, func() bool {
		addr, err := slotMaster(ctx, r.Addr(), "key:7")
		return err == nil && addr == r.Addr()
	})
	// the client finds the new master once it reloads its slot map from a
	// node that knows it: it reloads after every miss
	waitUntil(t, 20*time.Second, func() bool {
		got, err := cc.Get(ctx, "key:7").Int()
		if err != nil {
			cc.ReloadState(ctx)
		}
		return err == nil && got == 7
	})
}

// TestSentinel starts a master, a replica and three Sentinels, kills the
// master, and checks that the replica is promoted and that a failover
// client finds it, with the data written before.
func TestSentinel(t *testing.T) {
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("master %s, replica %s, sentinels %v ready in %v", s.Master().Addr(), s.Replica().Addr(), s.Addrs(), time.Since(start))
	if len(s.Sentinels()) != 3 || len(s.Addrs()) != 3 {
		t.Fatalf("%d sentinels, %d addresses; want 3", len(s.Sentinels()), len(s.Addrs()))
	}
	ctx := context.Background()
	c := s.Client(t, func(o *redis.FailoverOptions) { o.MaxRetries = -1 })
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if role := roleOf(t, s.Replica()); role != "slave" {
		t.Fatalf("replica's role %q, want slave", role)
	}
	// the replica has the key before the master goes
	waitUntil(t, 5*time.Second, func() bool {
		v, err := s.Replica().Client(t).Get(ctx, "k").Result()
		return err == nil && v == "v"
	})
	s.Master().Kill(t)
	killed := time.Now()
	promoted := s.Replica().AwaitPromotion(t, 30*time.Second)
	t.Logf("replica promoted %v after its master was killed", promoted.Sub(killed))
	waitUntil(t, 10*time.Second, func() bool {
		v, err := c.Get(ctx, "k").Result()
		return err == nil && v == "v"
	})
}

func roleOf(t *testing.T, s *Server) string {
	t.Helper()
	reply, err := do(context.Background(), s.Addr(), "ROLE")
	role, ok := reply.([]any)
	if err != nil || !ok || len(role) == 0 {
		t.Fatalf("ROLE on %s: %v, %v", s.Addr(), reply, err)
	}
	r, _ := role[0].(string)
	return r
}

func waitUntil(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
