package fiberlimit_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

// TestUnixSocketHasNoIdentity serves Fiber on a Unix socket: its peers
// have no address, so keyfuncs.IP finds no identity (401 under
// NoIdentity401), where fasthttp alone would give every client the
// identity ip:0.0.0.0 and one shared limit.
func TestUnixSocketHasNoIdentity(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	clientIP, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(1), Key: clientIP}}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberlimit.MustNew(l, rules, fiberlimit.WithNoIdentity(adapter.NoIdentity401)))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
	sock := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for i := range 3 {
		resp, err := client.Get("http://unix/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d over a Unix socket: %d, want 401 (no identity)", i, resp.StatusCode)
		}
	}
}
