package server

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP trace receiver: the spans it was sent, over gRPC
// or HTTP.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // of the resource
}

func (r *receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			r.attrs[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

func (r *receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var in collectortrace.ExportTraceServiceRequest
	if req.URL.Path != "/v1/traces" || proto.Unmarshal(b, &in) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.add(&in)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTracing: with TRACING_ENABLED each ShouldRateLimit call is a span,
// child of the caller's W3C or B3 parent, with the domain and the
// decision, exported to the OTLP receiver OTEL_EXPORTER_OTLP_ENDPOINT
// names, over gRPC and over HTTP.
func TestTracing(t *testing.T) {
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			rec := &receiver{attrs: map[string]string{}}
			var endpoint string
			if protocol == "grpc" {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				gs := grpc.NewServer()
				collectortrace.RegisterTraceServiceServer(gs, rec)
				go func() { _ = gs.Serve(lis) }()
				defer gs.Stop()
				endpoint = "http://" + lis.Addr().String()
			} else {
				hs := httptest.NewServer(rec)
				defer hs.Close()
				endpoint = hs.URL
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			s, err := New(testSettings(t, "TRACING_ENABLED", "true", "TRACING_EXPORTER_PROTOCOL", protocol,
				"TRACING_SERVICE_NAME", "envoy-ratelimit", "TRACING_SERVICE_NAMESPACE", "envoy-gateway-system", "TRACING_SAMPLING_RATE", "0"), discard)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Serve() }()
			cc, err := grpc.NewClient(s.Addrs()[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			rls := rlspb.NewRateLimitServiceClient(cc)
			parents := map[string][]string{
				// sampled parents: the rate of 0 samples only what a
				// parent sampled
				"w3c": {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
				"b3":  {"b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1"},
			}
			for name, p := range parents {
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), p...), 10*time.Second)
				for range 2 {
					if _, err := rls.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{descriptor("k", name)}}); err != nil {
						t.Fatal(err)
					}
				}
				cancel()
			}
			// no parent: not sampled at a rate of 0
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := rls.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{descriptor("k", "v")}}); err != nil {
				t.Fatal(err)
			}
			cancel()
			cc.Close()
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.Shutdown(sctx) // exports the spans held
			scancel()
			<-done

			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.spans) != 4 {
				t.Fatalf("%d spans, want 4 (two per sampled parent)", len(rec.spans))
			}
			byTrace := map[string][]*tracepb.Span{}
			for _, sp := range rec.spans {
				byTrace[string(sp.GetTraceId())] = append(byTrace[string(sp.GetTraceId())], sp)
			}
			for name, trace := range map[string]string{"w3c": "0af7651916cd43dd8448eb211c80319c", "b3": "80f198ee56343ba864fe8b2a57d3eff7"} {
				spans := byTrace[string(mustHex(t, trace))]
				if len(spans) != 2 {
					t.Fatalf("%s parent: %d spans in its trace", name, len(spans))
				}
				want := map[string]string{"w3c": "b7ad6b7169203331", "b3": "e457b5a2e4d86bd1"}[name]
				if string(spans[0].GetParentSpanId()) != string(mustHex(t, want)) {
					t.Errorf("%s: parent span %x, want %s", name, spans[0].GetParentSpanId(), want)
				}
				if spans[0].GetName() != "ShouldRateLimit" || attr(spans[0], "ratelimit.domain") != "d" {
					t.Errorf("%s: span %v", name, spans[0])
				}
				// the first call is allowed; the second is over the limit of
				// one a minute, unless the minute ended between them
				first, second := spans[0], spans[1]
				if second.GetStartTimeUnixNano() < first.GetStartTimeUnixNano() {
					first, second = second, first
				}
				if d1, d2 := attr(first, "ratelimit.decision"), attr(second, "ratelimit.decision"); d1 != "OK" || (d2 != "OVER_LIMIT" && d2 != "OK") {
					t.Errorf("%s: decisions %q then %q, want OK then OVER_LIMIT", name, d1, d2)
				}
			}
			if rec.attrs["service.name"] != "envoy-ratelimit" || rec.attrs["service.namespace"] != "envoy-gateway-system" || rec.attrs["service.instance.id"] == "" {
				t.Errorf("resource %v", rec.attrs)
			}
		})
	}
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
