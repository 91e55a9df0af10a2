package core_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
)

// idRecorder is an IdentityObserver that keeps each decision's rule,
// verdict and identity.
type idRecorder struct {
	recorder
	mu  sync.Mutex
	ids []string
}

func (r *idRecorder) DecidedIdentity(_ context.Context, e core.DecisionEvent, identity string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := "allowed"
	if !e.Allowed {
		v = "denied"
	}
	r.ids = append(r.ids, e.Rule+"/"+v+"/"+identity)
}

func TestIdentityObserver(t *testing.T) {
	id := &idRecorder{}
	plain := &recorder{}
	l := newLimiter(t, testkit.MustMemory(), core.WithObserver(plain), core.WithObserver(id))
	r := rule("login", core.PerHour(1), "user:1")
	for range 2 {
		if _, err := check(t, l, r); err != nil {
			t.Fatal(err)
		}
	}
	id.mu.Lock()
	got := strings.Join(id.ids, " ")
	id.mu.Unlock()
	if want := "login/allowed/user:1 login/denied/user:1"; got != want {
		t.Errorf("identity observer saw %q, want %q", got, want)
	}
	if n := len(id.recorder.events); n != 0 {
		t.Errorf("the identity observer's Decided was called %d times: want DecidedIdentity in its place", n)
	}
	if n := len(plain.events); n != 2 {
		t.Errorf("the plain observer saw %d decisions, want 2", n)
	}
	if got := l.FailurePolicy(); got != core.FailLocal {
		t.Errorf("FailurePolicy() = %v, want local", got)
	}
}

func TestDenialLog(t *testing.T) {
	for _, show := range []bool{false, true} {
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		var mu sync.Mutex
		now := time.Unix(1e9, 0)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		l := newLimiter(t, testkit.MustMemory(), core.WithLogger(logger), core.WithClock(clock),
			core.WithDenialLog(core.DenialLog{PerSecond: 3, ShowIdentity: show}))
		secret := "user:alice@example.com"
		r := rule("strict", core.PerHour(1), secret)
		// one allowed, then 19 denials in one second: 3 lines
		for range 20 {
			if _, err := check(t, l, r); err != nil {
				t.Fatal(err)
			}
		}
		out := strings.TrimSpace(buf.String())
		lines := strings.Split(out, "\n")
		if len(lines) != 3 {
			t.Fatalf("show=%v: %d lines for 19 denials in under a second, want 3:\n%s", show, len(lines), out)
		}
		wantID := "identity=" + core.Redact(secret)
		if show {
			wantID = "identity=" + secret
		}
		for _, want := range []string{"level=INFO", `msg="ratekit: denied"`, "rule=strict", wantID, "retry_after=", "reset_after=", "limit=1"} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("show=%v: line lacks %q: %s", show, want, lines[0])
			}
		}
		// a second later, the next line counts the 16 left out
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		if _, err := check(t, l, r); err != nil {
			t.Fatal(err)
		}
		out = strings.TrimSpace(buf.String())
		if last := out[strings.LastIndexByte(out, '\n')+1:]; !strings.Contains(last, "suppressed=16") {
			t.Errorf("show=%v: the line after the sampled second: %s, want suppressed=16", show, last)
		}
		if !show && strings.Contains(out, "alice") {
			t.Errorf("the identity is logged though not shown:\n%s", out)
		}
	}
	if _, err := core.NewLimiter(testkit.MustMemory(), core.WithDenialLog(core.DenialLog{PerSecond: -1})); err == nil {
		t.Error("a negative PerSecond is accepted")
	}
}
