package caddyratekit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A shared Limiter logs through the newest handler's logger still in use:
// a reload's new config takes over, and the old one gets it back when a
// new config that fails is cleaned up.
func TestLiveHandler(t *testing.T) {
	var old, next bytes.Buffer
	live := newLiveHandler()
	log := slog.New(live).With("limiter", "shared")
	oldID := live.add(slog.New(slog.NewTextHandler(&old, nil)))
	log.Warn("one")
	nextID := live.add(slog.New(slog.NewTextHandler(&next, nil)))
	log.Warn("two")
	live.remove(nextID)
	log.Warn("three")
	live.remove(oldID)
	if got := old.String(); !strings.Contains(got, "msg=one limiter=shared") || strings.Contains(got, "two") || !strings.Contains(got, "msg=three") {
		t.Errorf("the old config's log:\n%s", got)
	}
	if got := next.String(); !strings.Contains(got, "msg=two limiter=shared") || strings.Contains(got, "one") || strings.Contains(got, "three") {
		t.Errorf("the new config's log:\n%s", got)
	}
	if slog.New(live).Enabled(t.Context(), slog.LevelDebug) {
		t.Error("Debug enabled: the target's level is not followed")
	}
	grouped := slog.New(live.WithGroup("g")).With("a", 1)
	live.add(slog.New(slog.NewTextHandler(&next, nil)))
	grouped.Warn("four", "b", 2)
	if !strings.Contains(next.String(), "msg=four g.a=1 g.b=2") {
		t.Errorf("groups and attributes: %s", next.String())
	}
}
