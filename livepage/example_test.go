package livepage_test

import (
	"log"
	"net/http"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/livepage"
	"github.com/ratekit/ratekit/memorystore"
)

// A Limiter's live page under /ratekit/: the Recorder observes the
// Limiter, the Handler shows what it recorded and looks quotas up by the
// rules it is given.
func Example() {
	rec, err := livepage.NewRecorder(livepage.RecorderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close()
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store, core.WithObserver(rec))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	ip, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: ip}}
	page, err := livepage.New(livepage.Options{Token: "change me"},
		livepage.Source{Limiter: limiter, Recorder: rec, Rules: func() []core.Rule { return rules }})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ratekit/", page) // outside the limits, where only operators reach it
	_ = mux
	// Output:
}
