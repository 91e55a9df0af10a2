// Package xds receives the rate limit configuration from an xDS server,
// as envoyproxy/ratelimit does under CONFIG_TYPE=GRPC_XDS_SOTW (Envoy
// Gateway's setting): a state-of-the-world subscription over ADS to
// type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig. Each
// response is turned into the files envoy's service makes of it and
// loaded as files are: one that does not load is NACKed with the reason
// and the configuration in use stays; one that loads is applied at once,
// as a whole, and ACKed. When the stream ends (the control plane
// restarts) the client opens another after a backoff, keeping the
// configuration it has.
package xds

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/tlsreload"
)

// TypeURL is the type of the resources subscribed to.
const TypeURL = resource.RateLimitConfigType

// Apply validates files and, when they load, puts them in use as one
// configuration; its error is the reason sent with the NACK. version is
// the response's version_info.
type Apply func(files []config.File, version string) error

// Client is a running subscription.
type Client struct {
	set    settings.XDS
	apply  Apply
	log    *slog.Logger
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}

	// applied and refused are digests of the last resources applied and
	// of the last refused, so a resent configuration is not loaded again
	applied, refused [32]byte
	refusal          string
	// version is the version_info of the last response received, which
	// the ADS client's Response does not carry
	version atomic.Pointer[string]
}

// Start subscribes to the server set names; apply is called with the
// files of every response from the goroutine it starts.
func Start(set settings.XDS, apply Apply, log *slog.Logger) (*Client, error) {
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	if set.UseTLS {
		conf, err := tlsreload.Client(tlsreload.Files{Cert: set.ClientCert, Key: set.ClientKey, CA: set.ServerCACert, SAN: set.ServerSAN}, log)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_USE_TLS: %w", err)
		}
		creds = grpc.WithTransportCredentials(credentials.NewTLS(conf))
	}
	opts := []grpc.DialOption{
		creds,
		// envoy's client waits CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
		// between attempts, half of it random
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay: set.ConnectRetryInterval, Multiplier: 1, Jitter: 0.5, MaxDelay: set.ConnectRetryInterval,
			},
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	if set.MaxMsgSize > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(set.MaxMsgSize)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{set: set, apply: apply, log: log, cancel: cancel, done: make(chan struct{})}
	opts = append(opts, grpc.WithStreamInterceptor(c.keepVersion))
	var err error
	if c.conn, err = grpc.NewClient(set.ServerURL, opts...); err != nil {
		cancel()
		return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_URL=%q: %w", set.ServerURL, err)
	}
	go c.run(ctx)
	return c, nil
}

// Close ends the subscription and waits for its goroutine.
func (c *Client) Close() error {
	c.cancel()
	err := c.conn.Close()
	<-c.done
	return err
}

// node is the node sent with the subscription.
func (c *Client) node() *corev3.Node {
	md := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range c.set.NodeMetadata {
		md.Fields[k] = structpb.NewStringValue(v)
	}
	return &corev3.Node{Id: c.set.NodeID, Metadata: md}
}

func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	b := &backoff.ExponentialBackOff{
		InitialInterval: c.set.BackoffInitial, MaxInterval: c.set.BackoffMax, Multiplier: 2,
	}
	if c.set.BackoffJitter {
		b.RandomizationFactor = c.set.BackoffRandomFactor
	}
	b.Reset()
	sctx := metadata.NewOutgoingContext(ctx, metadata.New(c.set.Headers))
	// one ADS client for every stream: a new stream asks for the version
	// last ACKed, which a server that still has it need not send again
	ads := sotw.NewADSClient(sctx, c.node(), TypeURL)
	for {
		delivered, err := c.stream(ctx, ads)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			b.Reset()
		}
		wait := b.NextBackOff()
		c.log.Warn("xDS stream ended; the configuration in use stays", "server", c.set.ServerURL, "error", errString(err), "retry_in", wait.String())
		if !sleep(ctx, wait) {
			return
		}
	}
}

// stream subscribes once and handles the responses until the stream
// ends; delivered says whether one came.
func (c *Client) stream(ctx context.Context, ads sotw.ADSClient) (delivered bool, err error) {
	if err := ads.InitConnect(c.conn, grpc.WaitForReady(true)); err != nil {
		return false, err
	}
	for {
		resp, err := ads.Fetch()
		if err != nil {
			return delivered, err
		}
		delivered = true
		if err := c.handle(ctx, ads, resp.Resources); err != nil {
			return delivered, err
		}
	}
}

// handle loads one response and ACKs or NACKs it.
func (c *Client) handle(ctx context.Context, ads sotw.ADSClient, resources []*anypb.Any) error {
	sum := digest(resources)
	switch sum {
	case c.applied:
		// the configuration in use, sent again (on a new stream)
		return ads.Ack()
	case c.refused:
		// refused already: a server that sends it again at every NACK
		// (go-control-plane's snapshot cache does) is not answered in a
		// busy loop
		c.log.Debug("xDS configuration refused again", "error", c.refusal)
		if !sleep(ctx, c.set.ConnectRetryInterval) {
			return ctx.Err()
		}
		return ads.Nack(c.refusal)
	}
	err := c.load(resources)
	if err != nil {
		c.refused, c.refusal = sum, err.Error()
		c.log.Error("xDS configuration refused; the last good one stays", "error", err.Error())
		return ads.Nack(err.Error())
	}
	c.applied, c.refused = sum, [32]byte{}
	return ads.Ack()
}

func (c *Client) load(resources []*anypb.Any) error {
	files := make([]config.File, 0, len(resources))
	for _, r := range resources {
		var rc rlsconf.RateLimitConfig
		if err := r.UnmarshalTo(&rc); err != nil {
			return fmt.Errorf("resource of type %s: %w", r.GetTypeUrl(), err)
		}
		f, err := File(&rc)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	version := ""
	if v := c.version.Load(); v != nil {
		version = *v
	}
	return c.apply(files, version)
}

// keepVersion is a stream interceptor that keeps the version_info of each
// discovery response the stream receives.
func (c *Client) keepVersion(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return versionStream{cs, c}, nil
}

type versionStream struct {
	grpc.ClientStream
	c *Client
}

func (s versionStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*discovery.DiscoveryResponse); ok && err == nil {
		v := r.GetVersionInfo()
		s.c.version.Store(&v)
	}
	return err
}

// digest identifies a response's resources.
func digest(resources []*anypb.Any) [32]byte {
	h := sha256.New()
	for _, r := range resources {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return err.Error()
}
