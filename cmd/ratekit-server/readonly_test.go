//go:build linux

package main_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// movingProxy is one address in front of a Redis that moves, as a
// Kubernetes Service or a DNS name in front of a failed-over master: a new
// connection goes to the current target, one already made stays where it
// went.
type movingProxy struct {
	l      net.Listener
	target atomic.Pointer[string]
	mu     sync.Mutex
	conns  map[net.Conn]bool // guarded by mu
	closed bool              // guarded by mu
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *movingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &movingProxy{l: l, conns: map[net.Conn]bool{}}
	p.moveTo(target)
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *movingProxy) addr() string { return p.l.Addr().String() }

func (p *movingProxy) moveTo(target string) { p.target.Store(&target) }

func (p *movingProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

// pipe joins c to a connection to the current target until either ends.
func (p *movingProxy) pipe(c net.Conn) {
	u, err := net.DialTimeout("tcp", *p.target.Load(), 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, u) {
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { c.Close(); u.Close() }) }
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(u, c); closeBoth() })
	wg.Go(func() { _, _ = io.Copy(c, u); closeBoth() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// track records c and u to close at cleanup; false, with both closed,
// once the proxy is closed.
func (p *movingProxy) track(c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		u.Close()
		return false
	}
	p.conns[c], p.conns[u] = true, true
	return true
}

// TestFailoverBehindOneAddress fails a master over behind one address:
// the old master becomes a replica of the new one (REPLICAOF) and the
// address moves to the new one. The connections to the old one get
// READONLY, are closed and counted, and the server is back counting on
// the new master by itself; no caller gets an error meanwhile.
func TestFailoverBehindOneAddress(t *testing.T) {
	redistest.Require(t)
	oldMaster, newMaster := redistest.StartServer(t), redistest.StartServer(t)
	proxy := startProxy(t, oldMaster.Addr())
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"o.yaml": outageConfig})
	p := start(t, dir, map[string]string{
		"REDIS_URL": proxy.addr(), "REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR": "true", "USE_PROMETHEUS": "true",
		// no call times out while the old master resynchronizes, so that
		// none of its connections is closed for a timeout before it answers READONLY
		"RATEKIT_TIMEOUT": "5s",
	})
	tr := outageTraffic(conns(t, 2, p.GRPC))
	defer tr.end()
	ctx := context.Background()
	eventually(t, time.Minute, "counting on the first master", func() bool {
		n, err := oldMaster.Client(t).DBSize(ctx).Result()
		return err == nil && n > 0
	})

	host, port, _ := net.SplitHostPort(newMaster.Addr())
	if err := oldMaster.Client(t).ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.moveTo(newMaster.Addr())
	took := eventually(t, time.Minute, "counting on the new master", func() bool {
		n, err := newMaster.Client(t).DBSize(ctx).Result()
		return err == nil && n > 0
	})
	tr.end()
	readOnly := promValue(t, p.Prom, "ratelimit_redis_pool_readonly_error")
	t.Logf("back on the new master %v after the failover, %v READONLY replies; traffic: %v", took, readOnly, tr)
	if readOnly <= 0 {
		t.Errorf("READONLY replies counted: %v, want some", readOnly)
	}
	if tr.failed.Load() != 0 {
		t.Errorf("errors reached callers: %v", tr)
	}
}

// promValue is the value of an unlabelled series on addr's /metrics; 0
// when it is not there.
func promValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	code, body, err := proctest.Get(addr, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
