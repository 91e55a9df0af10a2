// Command tokens is the ratekit example app of a token budget: an API in
// front of a language model, whose answers are streams of tokens, limits
// each API key to -limit tokens per -period (1000 a minute by default).
//
//	go run ./examples/tokens                                          # embedded miniredis
//	go run ./examples/tokens -redis localhost:6379                    # replica A
//	go run ./examples/tokens -redis localhost:6379 -addr 127.0.0.1:8081   # replica B, one budget with A
//
// POST /v1/complete with X-API-Key: K and the JSON body {"tokens": N}
// answers 200 and streams N tokens, one line each, while K's budget is not
// in debt, and then charges the N tokens whatever the budget holds: an
// answer may cost more than is left, and the key then owes the rest. While
// K is in debt the answer is 429, with Retry-After and the rate-limit
// header fields. A client that closes the stream early is charged the
// tokens sent. GET /healthz is never limited, nor the live page
// (/ratekit/), GET /metrics (-metrics) or the admin routes (ADMIN_TOKEN).
// The budget is the rule named "default" (or the rules file's default
// rule, with -rules). Run it with -h for every flag and its environment
// variable.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/nethttp"
)

// Defaults of the tokens app, where they differ from the other apps'.
const (
	// DefaultLimit is the default budget: tokens per -period and key.
	DefaultLimit = 1000
	// CompletePath answers POST with a stream of tokens.
	CompletePath = "/v1/complete"
	// MaxTokens is the most tokens one answer streams.
	MaxTokens = 4096
	// TokenInterval is the time between two tokens, as a model takes to
	// produce them.
	TokenInterval = 5 * time.Millisecond
	// maxBody bounds the request's body.
	maxBody = 1 << 10
)

var defaults = app.Defaults{
	Limit:      DefaultLimit,
	LimitUsage: "tokens per period and API key (X-API-Key) on POST " + CompletePath,
	KeyMode:    app.KeyAPIKey,
	Routes: fmt.Sprintf("Serves POST %s (X-API-Key: K, body {\"tokens\": N}, 1 to %d): streams N tokens\n"+
		"while K's budget is not in debt, then charges them; GET /healthz, and, with -metrics,\n"+
		"GET /metrics (never limited).", CompletePath, MaxTokens),
	Try: func(c app.Config, base string) (string, string) {
		n := min(3*c.Limit, MaxTokens)
		msg := fmt.Sprintf("a completion of %d tokens spends part of the budget of %d", n, c.Limit)
		if n > c.Limit {
			msg = fmt.Sprintf("a completion of %d tokens puts the key in debt: the next is answered 429 until it is repaid", n)
		}
		return msg, fmt.Sprintf(`curl -N -H 'X-API-Key: my-key' -d '{"tokens": %d}' %s%s`, n, base, CompletePath)
	},
}

func main() { app.MainWith("tokens", defaults, newServer) }

// logger logs each completion: the tokens asked for and those sent.
var logger = app.NewLogger(os.Stderr)

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The budget: the default rule, charged the tokens each answer sent.
	budget, err := nethttp.New(limiter, nil, nethttp.WithRuleSet(rules.Default), nethttp.WithCharged(app.DefaultRule))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// The body is read before the budget is checked: a bad one spends
	// nothing.
	mux.Handle("POST "+CompletePath, parseBody(budget(http.HandlerFunc(complete))))
	mux.HandleFunc("GET "+app.HealthzPath, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	// the live page, never limited
	mux.Handle(app.PagePath, extra.Page)
	if extra.Metrics != nil { // -metrics
		mux.Handle("GET "+app.MetricsPath, extra.Metrics)
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		mux.Handle("GET "+app.AdminQuotaPath, extra.Admin)
		mux.Handle("POST "+app.AdminResetPath, extra.Admin)
	}
	return app.HTTPServer(mux), nil
}

// request is the body of POST /v1/complete.
type request struct {
	Tokens *int `json:"tokens"`
}

type tokensKey struct{}

// parseBody reads the tokens a request asks for into its context, or
// answers 400 with what is wrong.
func parseBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := readTokens(w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokensKey{}, n)))
	})
}

// readTokens returns the tokens of a body {"tokens": N}.
func readTokens(w http.ResponseWriter, r *http.Request) (int, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		return 0, fmt.Errorf(`want a JSON body {"tokens": N}: %v`, err)
	}
	if dec.More() {
		return 0, errors.New(`want one JSON object {"tokens": N}, and nothing after it`)
	}
	if req.Tokens == nil {
		return 0, errors.New(`want a JSON body {"tokens": N}: "tokens" is missing`)
	}
	if n := *req.Tokens; n < 1 || n > MaxTokens {
		return 0, fmt.Errorf("tokens is %d: want 1 to %d", n, MaxTokens)
	}
	return *req.Tokens, nil
}

// complete streams the tokens asked for, one line each, and reports each
// token sent as the answer's cost, so that a stream cut by its client is
// charged what went out.
func complete(w http.ResponseWriter, r *http.Request) {
	n := r.Context().Value(tokensKey{}).(int)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	sent := 0
	defer func() {
		logger.LogAttrs(r.Context(), slog.LevelInfo, "completion", slog.Int("tokens", n), slog.Int("sent", sent))
	}()
	tick := time.NewTicker(TokenInterval)
	defer tick.Stop()
	for sent < n {
		if _, err := fmt.Fprintf(w, "token %d\n", sent+1); err != nil {
			return // the client is gone
		}
		if err := rc.Flush(); err != nil {
			return
		}
		sent++
		nethttp.AddCost(r, 1)
		if sent == n {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
