package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// What this file starts fails over quickly: a master that stops answering
// is found out after a second, so a test sees its replica promoted within
// a few seconds.
const (
	// FailoverNodeTimeout is the cluster-node-timeout of the nodes of a
	// [StartReplicatedCluster], and the down-after-milliseconds of the
	// Sentinels of a [StartSentinel].
	FailoverNodeTimeout = time.Second

	// SentinelMaster is the name under which the Sentinels of a
	// [StartSentinel] know their master.
	SentinelMaster = "mymaster"

	// sentinels is how many Sentinels StartSentinel starts; two of them
	// must agree that the master is down.
	sentinels      = 3
	sentinelQuorum = 2

	// sentinelFailoverTimeout is the Sentinels' failover-timeout. A
	// Sentinel that was not elected to lead a failover gives up after it
	// (or after 10 s, whichever is shorter), and tries again after twice
	// it: with 4 s, a vote split three ways on a loaded machine costs 8 s,
	// and a wait of 30 s holds four tries.
	sentinelFailoverTimeout = 4 * time.Second

	// pollEvery is the interval of the waits of this file.
	pollEvery = 5 * time.Millisecond
)

// replicationArgs make a replica's first synchronisation start at once
// rather than after the default five seconds.
var replicationArgs = []string{"--repl-diskless-sync-delay", "0"}

// StartReplicatedCluster starts a Redis Cluster of the given number of
// masters, each with one replica, and waits until every node reports
// cluster_state:ok with all 16384 slots assigned and every replica has
// synchronised with its master. It calls [Require] first. A cluster of 3
// masters is 6 processes, ready in about three seconds.
//
// Every node has a cluster-node-timeout of [FailoverNodeTimeout]: when a
// master is killed, its replica is promoted within a few seconds
// ([Server.AwaitPromotion] waits for it). extraArgs go to every node's
// command line, such as "--cluster-require-full-coverage", "no".
//
// [Cluster.Servers] lists the masters, then the replicas in the same
// order; [Cluster.ReplicaOf] pairs them, and [Cluster.MasterOf] finds the
// node that serves a key now.
func StartReplicatedCluster(tb testing.TB, masters int, extraArgs ...string) *Cluster {
	tb.Helper()
	Require(tb)
	if masters < 1 || masters > clusterSlots {
		tb.Fatalf("redistest: StartReplicatedCluster: masters must be between 1 and %d, not %d", clusterSlots, masters)
	}
	mode := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-announce-ip", "127.0.0.1",
		"--cluster-node-timeout", strconv.FormatInt(FailoverNodeTimeout.Milliseconds(), 10),
	}
	mode = append(mode, replicationArgs...)
	c := &Cluster{masters: masters}
	for range 2 * masters {
		c.servers = append(c.servers, startServer(tb, freeClusterPort, mode, extraArgs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	err := c.create(ctx)
	if err == nil {
		err = c.replicate(ctx)
	}
	if err == nil {
		err = c.awaitOK(ctx)
	}
	for _, r := range c.servers[masters:] {
		if err == nil {
			err = awaitLinkUp(ctx, r)
		}
	}
	if err != nil {
		tb.Fatalf("redistest: creating cluster %v with replicas: %v\n%s", c.Addrs(), err, c.logTails())
	}
	return c
}

// replicate makes each replica replicate its master, once it knows the
// master.
func (c *Cluster) replicate(ctx context.Context) error {
	for i, r := range c.servers[c.masters:] {
		id, err := doString(ctx, c.servers[i].addr, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", c.servers[i].addr, err)
		}
		for {
			_, err = doString(ctx, r.addr, "CLUSTER", "REPLICATE", id)
			if err == nil {
				break
			}
			// the replica has not heard of its master yet
			select {
			case <-ctx.Done():
				return fmt.Errorf("CLUSTER REPLICATE %s on %s: %w", id, r.addr, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// ReplicaOf returns the node started as master's replica, or nil if there
// is none.
func (c *Cluster) ReplicaOf(master *Server) *Server {
	for i, s := range c.servers[:c.masters] {
		if s == master && c.masters+i < len(c.servers) {
			return c.servers[c.masters+i]
		}
	}
	return nil
}

// MasterOf returns the node that serves key now, as the first running node
// that answers sees it (CLUSTER KEYSLOT and CLUSTER SLOTS).
func (c *Cluster) MasterOf(tb testing.TB, key string) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), defaultAdminTimeout)
	defer cancel()
	var errs []error
	for _, s := range c.servers {
		addr, err := slotMaster(ctx, s.addr, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range c.servers {
			if m.addr == addr {
				return m
			}
		}
		tb.Fatalf("redistest: %s says %s serves %q: not a node of this cluster", s.addr, addr, key)
	}
	tb.Fatalf("redistest: no node tells which serves %q: %v", key, errors.Join(errs...))
	return nil
}

// slotMaster asks the node at addr for the address of the master serving
// key.
func slotMaster(ctx context.Context, addr, key string) (string, error) {
	reply, err := do(ctx, addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return "", err
	}
	slot, ok := reply.(int64)
	if !ok {
		return "", fmt.Errorf("CLUSTER KEYSLOT on %s: reply %#v", addr, reply)
	}
	reply, err = do(ctx, addr, "CLUSTER", "SLOTS")
	if err != nil {
		return "", err
	}
	ranges, _ := reply.([]any)
	for _, r := range ranges {
		f, _ := r.([]any)
		if len(f) < 3 {
			continue
		}
		first, _ := f[0].(int64)
		last, _ := f[1].(int64)
		node, _ := f[2].([]any)
		if slot < first || slot > last || len(node) < 2 {
			continue
		}
		host, _ := node[0].(string)
		port, _ := node[1].(int64)
		return net.JoinHostPort(host, strconv.FormatInt(port, 10)), nil
	}
	return "", fmt.Errorf("CLUSTER SLOTS on %s: no master for slot %d", addr, slot)
}

// AwaitPromotion waits until the server reports itself a master (ROLE),
// polling every 5 ms, and returns when it first saw it so. It fails the
// test if that takes longer than within. Use it on a replica after
// [Server.Kill] of its master.
func (s *Server) AwaitPromotion(tb testing.TB, within time.Duration) time.Time {
	tb.Helper()
	deadline := time.Now().Add(within)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		reply, err := do(ctx, s.addr, "ROLE")
		cancel()
		now := time.Now()
		if role, ok := reply.([]any); err == nil && ok && len(role) > 0 && role[0] == "master" {
			return now
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("ROLE: %v", reply)
		}
		if now.After(deadline) {
			logs := s.logTail()
			for _, d := range s.deciders {
				logs += "\n" + d.logTail()
			}
			tb.Fatalf("redistest: %s not promoted within %v (%v)\n%s", s.addr, within, last, logs)
		}
		time.Sleep(pollEvery)
	}
}

// awaitLinkUp waits until the replica at r reports its link to its master
// up, its first synchronisation done.
func awaitLinkUp(ctx context.Context, r *Server) error {
	for {
		info, err := doString(ctx, r.addr, "INFO", "replication")
		f := infoFields(info)
		if err == nil && f["role"] == "slave" && f["master_link_status"] == "up" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("role:%s master_link_status:%s", f["role"], f["master_link_status"])
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s: %w", r.addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Sentinel is a master, its replica and three Sentinels watching them,
// started by [StartSentinel].
type Sentinel struct {
	master, replica *Server
	sentinels       []*Server
}

// StartSentinel starts a standalone master, a replica of it and three
// Sentinels (redis-server --sentinel) that watch it under the name
// [SentinelMaster] with a quorum of two, each process on a free port of
// 127.0.0.1 and killed at cleanup. It waits until the replica has
// synchronised and every Sentinel knows the replica and the two other
// Sentinels, so that a failover can happen: about two seconds. It calls
// [Require] first.
//
// The Sentinels take the master for down after [FailoverNodeTimeout]
// without an answer; a killed master's replica is then promoted within a
// few seconds ([Server.AwaitPromotion] waits for it). extraArgs go to the
// master's and the replica's command lines.
func StartSentinel(tb testing.TB, extraArgs ...string) *Sentinel {
	tb.Helper()
	Require(tb)
	s := &Sentinel{}
	s.master = startServer(tb, freePort, replicationArgs, extraArgs)
	s.replica = startServer(tb, freePort,
		append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(s.master.port)}, replicationArgs...), extraArgs)
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n",
		SentinelMaster, s.master.port, sentinelQuorum, FailoverNodeTimeout.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	for range sentinels {
		s.sentinels = append(s.sentinels, startServerConf(tb, freePort, conf, []string{"--sentinel"}, nil))
	}
	s.replica.deciders = s.sentinels
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	err := awaitLinkUp(ctx, s.replica)
	for _, sen := range s.sentinels {
		if err == nil {
			err = awaitWatching(ctx, sen)
		}
	}
	if err != nil {
		var logs strings.Builder
		for _, srv := range s.servers() {
			logs.WriteString(srv.logTail() + "\n")
		}
		tb.Fatalf("redistest: starting Sentinel setup: %v\n%s", err, logs.String())
	}
	return s
}

// awaitWatching waits until the Sentinel at sen knows the master ok, its
// replica and every other Sentinel: INFO sentinel says
// "master0:name=mymaster,status=ok,address=…,slaves=1,sentinels=3".
func awaitWatching(ctx context.Context, sen *Server) error {
	want := map[string]string{"status": "ok", "slaves": "1", "sentinels": strconv.Itoa(sentinels)}
	for {
		info, err := doString(ctx, sen.addr, "INFO", "sentinel")
		m := infoFields(info)["master0"]
		got := map[string]string{}
		for kv := range strings.SplitSeq(m, ",") {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		ok := err == nil
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("master0:%s", m)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sentinel %s: %w", sen.addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Sentinel) servers() []*Server {
	return append([]*Server{s.master, s.replica}, s.sentinels...)
}

// Master returns the server started as master.
func (s *Sentinel) Master() *Server { return s.master }

// Replica returns the server started as the master's replica.
func (s *Sentinel) Replica() *Server { return s.replica }

// Sentinels returns the three Sentinels.
func (s *Sentinel) Sentinels() []*Server { return append([]*Server(nil), s.sentinels...) }

// Addrs returns the Sentinels' addresses, "127.0.0.1:port".
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sen := range s.sentinels {
		addrs[i] = sen.addr
	}
	return addrs
}

// Client returns a new go-redis failover client of the master, found
// through the Sentinels, closed when tb's test ends. The options start
// from go-redis defaults with MasterName and SentinelAddrs set; each opts
// function may change them before the client is created.
func (s *Sentinel) Client(tb testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	tb.Helper()
	o := &redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.Addrs()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewFailoverClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
