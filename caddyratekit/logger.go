package caddyratekit

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// liveHandler is a slog.Handler that sends each record to the handler of
// the newest config that uses a shared Limiter, so that a Limiter kept
// across reloads logs through the logging the running config sets up,
// never through the logger of a config that is gone.
type liveHandler struct {
	cur *atomic.Pointer[slog.Logger]
	// ops are the WithAttrs and WithGroup calls made on this handler, in
	// order, applied to the current target at each record.
	ops []func(slog.Handler) slog.Handler
}

func newLiveHandler(l *slog.Logger) liveHandler {
	h := liveHandler{cur: new(atomic.Pointer[slog.Logger])}
	h.cur.Store(l)
	return h
}

// set makes l the logger that records go to from now on.
func (h liveHandler) set(l *slog.Logger) { h.cur.Store(l) }

func (h liveHandler) target() slog.Handler {
	t := h.cur.Load().Handler()
	for _, op := range h.ops {
		t = op(t)
	}
	return t
}

func (h liveHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.cur.Load().Handler().Enabled(ctx, level)
}

func (h liveHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h liveHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })
}

func (h liveHandler) WithGroup(name string) slog.Handler {
	return h.with(func(t slog.Handler) slog.Handler { return t.WithGroup(name) })
}

func (h liveHandler) with(op func(slog.Handler) slog.Handler) liveHandler {
	h.ops = append(h.ops[:len(h.ops):len(h.ops)], op)
	return h
}
