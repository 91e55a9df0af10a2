// Command gin is the end-to-end benchmark's baseline for examples/gin: the
// same engine set-up and bodies, and one bare script call per request to
// GET / instead of ratekit's middleware.
package main

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/bench/baseline/internal/base"
)

func main() {
	a := base.Parse("gin")
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET(base.RootPath, func(c *gin.Context) {
		if err := a.Count(c.Request.Context(), c.Request.RemoteAddr); err != nil {
			c.Status(http.StatusInternalServerError)
			base.Fail(c.Writer, err)
			return
		}
		c.String(http.StatusOK, "hello from gin\n")
	})
	r.GET(base.HealthzPath, func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	srv := base.HTTPServer(r)
	a.Serve("gin", srv.Serve, srv.Shutdown)
}
