package caddyratekit

import "log/slog"

// SetLimiterLogger sends the logs of h's Limiter to l from now on: the
// tests' Caddy contexts log at Debug, which would log every decision.
func SetLimiterLogger(h *Handler, l *slog.Logger) { h.shared.log.add(l) }
