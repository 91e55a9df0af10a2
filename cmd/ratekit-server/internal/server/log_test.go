package server

import (
	"context"
	"log/slog"
	"sync"
)

var discard = slog.New(slog.DiscardHandler)

// recorder is a slog handler that keeps the level of each message it is
// given, every level enabled.
type recorder struct {
	mu     sync.Mutex
	levels map[string][]slog.Level
}

func newRecorder() *recorder { return &recorder{levels: map[string][]slog.Level{}} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.levels[rec.Message] = append(r.levels[rec.Message], rec.Level)
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// levelsOf returns the levels the message was logged at.
func (r *recorder) levelsOf(msg string) []slog.Level {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Level(nil), r.levels[msg]...)
}
