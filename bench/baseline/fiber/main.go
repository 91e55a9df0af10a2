// Command fiber is the end-to-end benchmark's baseline for examples/fiber:
// the same app set-up and bodies, and one bare script call per request to
// GET / instead of ratekit's middleware.
package main

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/ratekit/ratekit/bench/baseline/internal/base"
)

func main() {
	a := base.Parse("fiber")
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.Use(recover.New())
	f.Get(base.RootPath, func(c *fiber.Ctx) error {
		// the client's IP as fiberlimit reads it: the socket peer
		if err := a.Count(c.UserContext(), c.Context().RemoteIP().String()); err != nil {
			return c.Status(fiber.StatusInternalServerError).SendString("script call failed: " + err.Error() + "\n")
		}
		return c.SendString("hello from fiber\n")
	})
	f.Get(base.HealthzPath, func(c *fiber.Ctx) error { return c.SendString("ok\n") })
	a.Serve("fiber", f.Listener, f.ShutdownWithContext)
}
