//go:build linux

package main_test

import (
	"context"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// rawCodec sends bytes as they are, to send malformed protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

var _ encoding.Codec = rawCodec{}

// TestBadInput sends a running server what a hostile client would:
// malformed protobuf and JSON, braces and control bytes, 64 KiB values,
// 10,000 entries and 10,000 descriptors. Each gets a clear error or an
// answer, and the server stays up and healthy.
func TestBadInput(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"b.yaml": "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr()})
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	for _, garbage := range [][]byte{{0xff, 0xff, 0xff}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, []byte(strings.Repeat("\x12\x00", 1000))} {
		var out []byte
		err := conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &garbage, &out, grpc.ForceCodecV2(nil), grpc.ForceCodec(rawCodec{}))
		if c := status.Code(err); c != codes.Internal && c != codes.InvalidArgument && c != codes.OK {
			t.Errorf("malformed protobuf: %v", err)
		}
	}
	client := rlspb.NewRateLimitServiceClient(conn)
	long := strings.Repeat("v", 64<<10)
	for _, v := range []string{"}{", "{x}", "\x00\x1b[2J\r\n", long, "#" + long} {
		r, err := client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "b", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("k", v)}})
		if err != nil || r.GetOverallCode() != rlspb.RateLimitResponse_OK {
			t.Errorf("value %.20q: %v %v", v, r, err)
		}
	}
	huge := &rlv3.RateLimitDescriptor{}
	for range 10_000 {
		huge.Entries = append(huge.Entries, &rlv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	many := make([]*rlv3.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = descriptor("k", "v")
	}
	for _, r := range []*rlspb.RateLimitRequest{{Domain: "b", Descriptors: []*rlv3.RateLimitDescriptor{huge}}, {Domain: "b", Descriptors: many}} {
		if _, err := client.ShouldRateLimit(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("an oversized request: %v, want InvalidArgument", err)
		}
	}
	for _, body := range []string{"{", `{"domain":"b","descriptors":[{"entries":[{"key":"k","value":{}}]}]}`, strings.Repeat("[", 100000), "\x00\xff"} {
		if code, _, err := proctest.PostJSON(p.HTTP, body); err != nil || code != 400 {
			t.Errorf("/json %.20q: %d %v", body, code, err)
		}
	}
	rc := rs.Client(t)
	keys, _ := rc.Keys(ctx, "*").Result()
	for _, k := range keys {
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || !strings.HasSuffix(k, "}") || len(k) > 200 {
			t.Errorf("key %.80q can steer its slot", k)
		}
	}
	if code, body, _ := proctest.Get(p.HTTP, "/healthcheck"); code != 200 || body != "OK" || p.Exited() {
		t.Fatalf("after the bad input: %d %q, exited %v", code, body, p.Exited())
	}
}
