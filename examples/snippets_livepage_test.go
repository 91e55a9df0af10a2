package examples_test

// Snippets of docs/live-page.md, checked like those of snippets_test.go.

import (
	"log"
	"log/slog"
	"net/http"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/livepage"
	"github.com/ratekit/ratekit/redisstore"
)

// The live page of a Limiter, with the fleet's view in Redis.
func Example_livePage() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ip, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: ip}}
	logger := slog.Default()
	mux := http.NewServeMux()
	// snippet:livepage
	fleet, err := livepage.NewRedisFleet(client, core.DefaultPrefix) // optional: the fleet's view
	if err != nil {
		log.Fatal(err)
	}
	rec, err := livepage.NewRecorder(livepage.RecorderOptions{Fleet: fleet})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close()
	limiter, err := core.NewLimiter(store, core.WithObserver(rec), core.WithLogger(logger),
		core.WithDenialLog(core.DenialLog{})) // a sampled line per denial
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	page, err := livepage.New(livepage.Options{Token: os.Getenv("ADMIN_TOKEN")},
		livepage.Source{Limiter: limiter, Recorder: rec, Rules: func() []core.Rule { return rules }})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/ratekit/", page) // outside the limiting middleware
	// snippet:end
	// Output:
}
