package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/internal/tickctx"
	"github.com/ratekit/ratekit/redisstore"
)

// Each front door translates its protocol to the one Service and back,
// and holds no limiting logic of its own: gRPC (rlsServer), /json, the
// admin endpoints, and forward auth (GET /check, forwardauth.go).

// rlsServer is envoy's RateLimitService over gRPC.
type rlsServer struct {
	rlspb.UnimplementedRateLimitServiceServer
	svc   *service.Service
	stats *stats.Stats
	log   *slog.Logger
}

func (g *rlsServer) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	start := time.Now()
	g.stats.TotalRequests.Inc()
	resp, err := g.svc.ShouldRateLimit(ctx, req)
	g.stats.ObserveResponse(time.Since(start))
	if err != nil {
		return nil, grpcError(ctx, err, g.log)
	}
	return resp, nil
}

// grpcError gives err a gRPC code: InvalidArgument for a bad request,
// Unavailable without a configuration, the context's code when the caller
// gave up, Internal otherwise.
func grpcError(ctx context.Context, err error, log *slog.Logger) error {
	switch {
	case errors.Is(err, service.ErrBadRequest):
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), service.ErrBadRequest.Error()+": "))
	case errors.Is(err, service.ErrNoConfig):
		return status.Error(codes.Unavailable, err.Error())
	case tickctx.Expired(ctx) != nil: // its deadline passed, its timer fired or not
		return status.FromContextError(tickctx.Expired(ctx)).Err()
	}
	log.Warn("rate limit call failed", "error", err)
	return status.Error(codes.Internal, err.Error())
}

// jsonHandler is envoy's /json: a RateLimitRequest as protojson in, the
// RateLimitResponse out, 200 when OK, 429 when over the limit, 400 for a
// body that is not a request or a request the service refuses, 413 for a
// body of more than maxBody bytes (RATEKIT_MAX_REQUEST_BYTES).
func jsonHandler(svc *service.Service, maxBody int64, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			writeStatus(w, http.StatusBadRequest)
			return
		}
		var req rlspb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			log.Debug("/json: bad body", "error", err)
			writeStatus(w, http.StatusBadRequest)
			return
		}
		resp, err := svc.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			log.Debug("/json: request refused", "error", err)
			writeStatus(w, http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			writeStatus(w, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.GetOverallCode() {
		case rlspb.RateLimitResponse_UNKNOWN:
			w.WriteHeader(http.StatusInternalServerError)
		case rlspb.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	}
}

func writeStatus(w http.ResponseWriter, code int) {
	http.Error(w, http.StatusText(code), code)
}

// adminHandler serves GET /admin/quota and POST /admin/reset, each with
// the descriptor in the query (domain=D&K1=V1&K2=V2..., entries in query
// order) and Authorization: Bearer <RATEKIT_ADMIN_TOKEN>.
func adminHandler(svc *service.Service, token string, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			if r.Header.Get("Authorization") != "" {
				// the token is never logged: a near miss would tell
				log.Warn("wrong admin token", "client", r.RemoteAddr, "path", r.URL.Path)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratekit-admin"`)
			writeStatus(w, http.StatusUnauthorized)
			return
		}
		domain, entries, err := descriptorOf(r.URL.RawQuery)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case r.URL.Path == "/admin/quota" && r.Method == http.MethodGet:
			qs, err := svc.Peek(r.Context(), domain, entries)
			if err != nil {
				adminError(w, err, log)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"domain": domain, "limits": qs})
		case r.URL.Path == "/admin/reset" && r.Method == http.MethodPost:
			if err := svc.Reset(r.Context(), domain, entries); err != nil {
				adminError(w, err, log)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			writeStatus(w, http.StatusMethodNotAllowed)
		}
	}
}

func adminError(w http.ResponseWriter, err error, log *slog.Logger) {
	if errors.Is(err, service.ErrBadRequest) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if errors.Is(err, redisstore.ErrNoPermission) {
		// Redis answered, and refused: say which permission, not that it
		// did not answer
		log.Warn("admin call failed: the Redis user lacks a permission", "error", err)
		http.Error(w, "the Redis user lacks a permission: "+err.Error(), http.StatusInternalServerError)
		return
	}
	log.Warn("admin call failed", "error", err)
	http.Error(w, "Redis did not answer: "+err.Error(), http.StatusServiceUnavailable)
}

// maxEntries bounds the entries of a descriptor given in a query.
const maxEntries = 64

// descriptorOf reads domain=D and the other pairs of a raw query, in
// order, as one descriptor's entries.
func descriptorOf(raw string) (string, []*rlv3.RateLimitDescriptor_Entry, error) {
	var (
		domain  string
		entries []*rlv3.RateLimitDescriptor_Entry
	)
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err := errors.Join(err1, err2); err != nil {
			return "", nil, errors.New("bad query: " + err.Error())
		}
		if key == "domain" {
			domain = val
			continue
		}
		if len(entries) == maxEntries {
			return "", nil, errors.New("too many entries")
		}
		entries = append(entries, &rlv3.RateLimitDescriptor_Entry{Key: key, Value: val})
	}
	if domain == "" || len(entries) == 0 {
		return "", nil, errors.New("want domain=D and at least one KEY=VALUE")
	}
	return domain, entries, nil
}
