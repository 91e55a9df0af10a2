// Command nethttp is the end-to-end benchmark's baseline for
// examples/nethttp: the same mux and bodies, and one bare script call per
// request to GET / instead of ratekit's middleware.
package main

import (
	"io"
	"net/http"

	"github.com/ratekit/ratekit/bench/baseline/internal/base"
)

func main() {
	a := base.Parse("nethttp")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Count(r.Context(), r.RemoteAddr); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			base.Fail(w, err)
			return
		}
		io.WriteString(w, "hello from net/http\n")
	})
	mux.HandleFunc("GET "+base.HealthzPath, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	srv := base.HTTPServer(mux)
	a.Serve("nethttp", srv.Serve, srv.Shutdown)
}
