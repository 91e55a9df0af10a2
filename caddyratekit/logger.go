package caddyratekit

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// liveHandler is a slog.Handler that sends each record to the logger of
// the newest handler still using a shared Limiter, so that a Limiter kept
// across reloads logs through the logging of the config that runs, never
// through that of a config that is gone.
type liveHandler struct {
	cur   *atomic.Pointer[slog.Logger]
	users *loggerUsers
	// ops are the WithAttrs and WithGroup calls made on this handler, in
	// order, applied to the current target at each record.
	ops []func(slog.Handler) slog.Handler
}

// loggerUsers are the loggers of the handlers using a Limiter, in the
// order they came.
type loggerUsers struct {
	mu   sync.Mutex
	next int
	ids  []int
	logs []*slog.Logger
}

func newLiveHandler() liveHandler {
	return liveHandler{cur: new(atomic.Pointer[slog.Logger]), users: new(loggerUsers)}
}

// add makes l the logger that records go to, until it is removed, and
// returns its id for remove.
func (h liveHandler) add(l *slog.Logger) int {
	u := h.users
	u.mu.Lock()
	defer u.mu.Unlock()
	id := u.next
	u.next++
	u.ids, u.logs = append(u.ids, id), append(u.logs, l)
	h.cur.Store(l)
	return id
}

// remove drops the logger of id; records go to the newest one left.
func (h liveHandler) remove(id int) {
	u := h.users
	u.mu.Lock()
	defer u.mu.Unlock()
	if i := slices.Index(u.ids, id); i >= 0 {
		u.ids, u.logs = slices.Delete(u.ids, i, i+1), slices.Delete(u.logs, i, i+1)
	}
	if n := len(u.logs); n > 0 {
		h.cur.Store(u.logs[n-1])
	}
}

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
