package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterBusOffset is the distance from a node's port to its cluster bus
	// port.
	clusterBusOffset = 10000
	// clusterTimeout bounds the creation of a cluster, from the first
	// CLUSTER command to cluster_state:ok on every node.
	clusterTimeout = 30 * time.Second

	// Cluster node ports are drawn from [clusterPortMin, clusterPortMax], so
	// that both the port and its bus port (port+10000) lie below Linux's
	// default ephemeral range (32768-60999), where the kernel picks the
	// ports of outgoing connections and of listeners on port 0.
	clusterPortMin = 10000
	clusterPortMax = 22767
)

// Cluster is a Redis Cluster started by [StartCluster] (masters only) or
// [StartReplicatedCluster] (each master with a replica).
type Cluster struct {
	servers []*Server // the masters, then their replicas, as started
	masters int       // how many of servers were started as masters
}

// StartCluster starts a Redis Cluster of the given number of masters, without
// replicas, and waits until every node reports cluster_state:ok with all
// 16384 slots assigned. The slots are split into contiguous ranges of nearly
// equal size, in the order of [Cluster.Servers]. It calls [Require] first.
//
// Each node is a [Server] on 127.0.0.1 with cluster-enabled yes and a
// directory and nodes file of its own; its cluster bus port, port+10000, was
// free too when the port was chosen. Each node is killed at cleanup. Nodes
// use Redis's default cluster-node-timeout (15 s).
//
// Creating a cluster takes about two seconds: a master that has just started
// waits that long before it reports the cluster as ok.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	Require(tb)
	if masters < 1 || masters > clusterSlots {
		tb.Fatalf("redistest: StartCluster: masters must be between 1 and %d, not %d", clusterSlots, masters)
	}
	c := &Cluster{masters: masters}
	for range masters {
		s := startServer(tb, freeClusterPort, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			// Without it a node learns its own address only from an
			// incoming CLUSTER MEET, which the first node may never get.
			"--cluster-announce-ip", "127.0.0.1",
		}, nil)
		c.servers = append(c.servers, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.create(ctx); err != nil {
		tb.Fatalf("redistest: creating cluster: %v\n%s", err, c.logTails())
	}
	if err := c.awaitOK(ctx); err != nil {
		tb.Fatalf("redistest: cluster %v did not become ready: %v\n%s", c.Addrs(), err, c.logTails())
	}
	return c
}

// create assigns the slots and joins the nodes, as redis-cli --cluster
// create does.
func (c *Cluster) create(ctx context.Context) error {
	n := c.masters
	for i, s := range c.servers[:n] {
		// Distinct config epochs spare the nodes the collision resolution
		// that would otherwise bump them one by one.
		if _, err := doString(ctx, s.addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", s.addr, err)
		}
		first, last := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		// CLUSTER ADDSLOTS rather than ADDSLOTSRANGE, which needs Redis 7.
		args := make([]string, 0, 2+last-first+1)
		args = append(args, "CLUSTER", "ADDSLOTS")
		for slot := first; slot <= last; slot++ {
			args = append(args, strconv.Itoa(slot))
		}
		if _, err := doString(ctx, s.addr, args...); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTS %d..%d on %s: %w", first, last, s.addr, err)
		}
	}
	// Each pair of nodes meets once, directly: introductions by gossip alone
	// can take a few seconds more.
	for j, b := range c.servers {
		for _, a := range c.servers[:j] {
			if _, err := doString(ctx, a.addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.port)); err != nil {
				return fmt.Errorf("CLUSTER MEET %s from %s: %w", b.addr, a.addr, err)
			}
		}
	}
	return nil
}

// awaitOK waits until every node sees the whole cluster as ok.
func (c *Cluster) awaitOK(ctx context.Context) error {
	for {
		err := c.checkOK(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errNodeExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var errNodeExited = errors.New("cluster node exited")

// checkOK returns nil if CLUSTER INFO on every node reports the cluster ok,
// all slots assigned, every node known and as many masters serving slots
// as were started.
func (c *Cluster) checkOK(ctx context.Context) error {
	n, size := strconv.Itoa(len(c.servers)), strconv.Itoa(c.masters)
	for _, s := range c.servers {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p == nil || p.exited() {
			return fmt.Errorf("%w: %s", errNodeExited, s.addr)
		}
		info, err := doString(ctx, s.addr, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", s.addr, err)
		}
		f := infoFields(info)
		want := map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    n,
			"cluster_size":           size,
		}
		for k, v := range want {
			if f[k] != v {
				return fmt.Errorf("node %s has %s:%s, want %s", s.addr, k, f[k], v)
			}
		}
	}
	return nil
}

// WaitReady waits until every node again reports cluster_state:ok with all
// slots assigned and every node known, and fails the test if that takes
// longer than 30 seconds. Use it after [Server.Restart] of a node: a
// restarted master answers CLUSTERDOWN for about two seconds. It fails at
// once if a node is not running.
func (c *Cluster) WaitReady(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.awaitOK(ctx); err != nil {
		tb.Fatalf("redistest: cluster %v not ready: %v\n%s", c.Addrs(), err, c.logTails())
	}
}

// Addrs returns the addresses of the nodes, "127.0.0.1:port", in the order
// of [Cluster.Servers].
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.addr
	}
	return addrs
}

// Servers returns the nodes of the cluster as they were started: the
// masters, the first holding the lowest slots, then (in a
// [StartReplicatedCluster]) their replicas in the same order. Each can be
// paused, killed and restarted like a standalone [Server].
func (c *Cluster) Servers() []*Server {
	return append([]*Server(nil), c.servers...)
}

// Client returns a new go-redis cluster client seeded with every node
// address, closed when tb's test ends. The options start from go-redis
// defaults with Addrs set; each opts function may change them before the
// client is created.
func (c *Cluster) Client(tb testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// logTails returns the end of every node's log.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, s := range c.servers {
		b.WriteString(s.logTail())
		b.WriteByte('\n')
	}
	return b.String()
}

// freeClusterPort returns a port p such that both p and its cluster bus port
// p+10000 on 127.0.0.1 were free a moment ago.
func freeClusterPort() (int, error) {
	var lastErr error
	for range 200 {
		p := clusterPortMin + rand.IntN(clusterPortMax-clusterPortMin+1)
		l1, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			lastErr = err
			continue
		}
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+clusterBusOffset)))
		l1.Close()
		if err != nil {
			lastErr = err
			continue
		}
		l2.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port pair (p, p+%d) found in [%d, %d]: %w", clusterBusOffset, clusterPortMin, clusterPortMax, lastErr)
}
