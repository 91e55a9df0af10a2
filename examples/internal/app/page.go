package app

import (
	"slices"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/livepage"
)

// PagePath is where every app serves the limiter's live page (package
// livepage): the page at GET /ratekit/, its data at GET
// /ratekit/status.json. It is never limited.
const PagePath = "/ratekit/"

// newRecorder returns the live page's observer, publishing this process's
// offenders to the fleet on the app's Redis.
func newRecorder(backend *Backend, cfg Config) (*livepage.Recorder, error) {
	fleet, err := livepage.NewRedisFleet(backend.Client, cfg.Prefix)
	if err != nil {
		return nil, err
	}
	return livepage.NewRecorder(livepage.RecorderOptions{Fleet: fleet})
}

// newPage returns the live page of limiter over the app's rules, which
// takes writes with ADMIN_TOKEN.
func newPage(limiter *core.Limiter, rec *livepage.Recorder, rules Rules, cfg Config) (*livepage.Handler, error) {
	current := func() []core.Rule {
		all := slices.Concat(rules.Default.Rules(), rules.Strict.Rules(), rules.Login)
		return all
	}
	return livepage.New(livepage.Options{Token: cfg.AdminToken, ShowIdentities: cfg.ShowIdentities},
		livepage.Source{Limiter: limiter, Recorder: rec, Rules: current})
}
