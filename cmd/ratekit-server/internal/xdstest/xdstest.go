// Package xdstest runs an xDS control plane for tests: go-control-plane's
// ADS server over its snapshot cache, serving RateLimitConfig snapshots,
// with TLS, and records the ACKs and NACKs it is sent. It can be stopped
// and started again on the same address, as a control plane restarts.
package xdstest

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Reply is a request a client sent after a response: an ACK (Error
// empty) or a NACK of the response with Nonce.
type Reply struct {
	Stream                      int64
	Node, Version, Nonce, Error string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Addr  string
	tls   *tls.Config
	cache cache.SnapshotCache

	mu      sync.Mutex
	srv     *grpc.Server
	replies []Reply
	streams int
}

// Start serves on addr ("127.0.0.1:0" for a free port) with conf (nil:
// no TLS), until the test ends.
func Start(t testing.TB, addr string, conf *tls.Config) *ControlPlane {
	t.Helper()
	cp := &ControlPlane{tls: conf, cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil)}
	cp.Addr = addr
	cp.Restart(t)
	t.Cleanup(cp.Stop)
	return cp
}

// Stop stops serving, closing every stream.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	srv := cp.srv
	cp.srv = nil
	cp.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// Restart stops serving, if it serves, and serves again on the same
// address with the same snapshots.
func (cp *ControlPlane) Restart(t testing.TB) {
	t.Helper()
	cp.Stop()
	var lis net.Listener
	var err error
	// the port was just freed: the listen is retried while the kernel
	// lets go of it
	for deadline := time.Now().Add(10 * time.Second); ; {
		if lis, err = net.Listen("tcp", cp.Addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	cp.Addr = lis.Addr().String()
	var opts []grpc.ServerOption
	if cp.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cp.tls)))
	}
	srv := grpc.NewServer(opts...)
	x := serverv3.NewServer(context.Background(), cp.cache, serverv3.CallbackFuncs{
		StreamOpenFunc: func(context.Context, int64, string) error {
			cp.mu.Lock()
			cp.streams++
			cp.mu.Unlock()
			return nil
		},
		StreamRequestFunc: func(stream int64, req *discovery.DiscoveryRequest) error {
			if req.GetResponseNonce() == "" {
				return nil
			}
			cp.mu.Lock()
			cp.replies = append(cp.replies, Reply{Stream: stream, Node: req.GetNode().GetId(), Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(), Error: req.GetErrorDetail().GetMessage()})
			cp.mu.Unlock()
			return nil
		},
	})
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, x)
	cp.mu.Lock()
	cp.srv = srv
	cp.mu.Unlock()
	go func() { _ = srv.Serve(lis) }()
}

// Set makes configs, as version, the snapshot of node.
func (cp *ControlPlane) Set(t testing.TB, node, version string, configs ...*rlsconf.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(configs))
	for i, c := range configs {
		rs[i] = c
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// Replies returns the ACKs and NACKs received so far.
func (cp *ControlPlane) Replies() []Reply {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]Reply(nil), cp.replies...)
}

// Streams returns how many streams were opened.
func (cp *ControlPlane) Streams() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.streams
}
