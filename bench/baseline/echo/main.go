// Command echo is the end-to-end benchmark's baseline for examples/echo: the
// same router set-up and bodies, and one bare script call per request to
// GET / instead of ratekit's middleware.
package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/bench/baseline/internal/base"
)

func main() {
	a := base.Parse("echo")
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET(base.RootPath, func(c echo.Context) error {
		if err := a.Count(c.Request().Context(), c.Request().RemoteAddr); err != nil {
			return c.String(http.StatusInternalServerError, "script call failed: "+err.Error()+"\n")
		}
		return c.String(http.StatusOK, "hello from echo\n")
	})
	e.GET(base.HealthzPath, func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	srv := base.HTTPServer(e)
	a.Serve("echo", srv.Serve, srv.Shutdown)
}
