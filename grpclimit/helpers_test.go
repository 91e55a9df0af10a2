package grpclimit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// apiKeyIdentity returns the identity that keyfuncs.APIKey gives key.
func apiKeyIdentity(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "apikey:" + hex.EncodeToString(sum[:16])
}

// token returns an HS256 token for sub, signed with secret, valid for an
// hour.
func token(tb testing.TB, secret []byte, sub string) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub,
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// staticRequest is a core.Request with a route and nothing else.
type staticRequest struct{ route string }

func (r staticRequest) Context() context.Context   { return context.Background() }
func (staticRequest) Method() string               { return "POST" }
func (r staticRequest) Path() string               { return r.route }
func (r staticRequest) Route() string              { return r.route }
func (staticRequest) Header(string) string         { return "" }
func (staticRequest) HeaderValues(string) []string { return nil }
func (staticRequest) Query(string) string          { return "" }
func (staticRequest) RemoteAddr() string           { return "" }

// registerHealth registers the standard health service on srv.
func registerHealth(srv *grpc.Server) { healthpb.RegisterHealthServer(srv, health.NewServer()) }

// checkHealth calls the health service's Check, and returns the header
// metadata of the answer.
func checkHealth(tb testing.TB, conn *grpc.ClientConn) (metadata.MD, error) {
	tb.Helper()
	var md metadata.MD
	resp, err := healthpb.NewHealthClient(conn).Check(tb.Context(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		tb.Errorf("health: %v, want SERVING", resp.GetStatus())
	}
	return md, err
}

// watchHealth opens the health service's Watch stream and reads its first
// answer.
func watchHealth(tb testing.TB, conn *grpc.ClientConn) error {
	tb.Helper()
	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = w.Recv()
	return err
}
