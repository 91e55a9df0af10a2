package adapter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Meter counts the units an answer costs, such as the tokens a handler
// streams, for the rules that charge them once the answer is done
// ([Config.Charged]). A handler adds to it as it produces its answer, so
// that an answer cut short (the client gone, a panic) is charged what was
// produced. It is safe for concurrent use.
type Meter struct {
	units   atomic.Int64
	mu      sync.Mutex
	holds   int    // writers that go on after the handler returns
	pending func() // the charge that waits for them
}

// Hold holds the charge of the meter's answer until the returned release
// is called, for a body that a writer produces after its handler returns
// (fasthttp's SetBodyStreamWriter): [Middleware.Charge] then waits for
// every hold's release and charges the units counted by then. Calling
// release again does nothing; a hold never released is never charged.
func (m *Meter) Hold() (release func()) {
	if m == nil {
		return func() {}
	}
	m.mu.Lock()
	m.holds++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.holds--
			var charge func()
			if m.holds == 0 {
				charge, m.pending = m.pending, nil
			}
			m.mu.Unlock()
			if charge != nil {
				charge()
			}
		})
	}
}

// later keeps charge for the last hold's release, and reports whether
// there is a hold.
func (m *Meter) later(charge func()) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holds == 0 {
		return false
	}
	m.pending = charge
	return true
}

// Add counts n more units; n below 0 is ignored.
func (m *Meter) Add(n int) {
	if m != nil && n > 0 {
		m.units.Add(int64(n))
	}
}

// Units returns the units counted so far.
func (m *Meter) Units() int {
	if m == nil {
		return 0
	}
	return int(m.units.Load())
}

type meterKey struct{}

// WithMeter returns ctx carrying m, for [MeterOf].
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// MeterOf returns the meter of the request whose context is ctx, nil when
// no middleware charges its answer (a nil Meter counts nothing).
func MeterOf(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Charging reports whether the middleware charges answers ([Config.Charged]):
// the adapter then gives the handler a [Meter] and calls [Middleware.Charge]
// once the answer is done.
func (m *Middleware) Charging() bool { return len(m.cfg.Charged) > 0 }

// chargeTimeout bounds a charge made in the background.
const chargeTimeout = 10 * time.Second

// Charge charges the units meter counted to the rules of [Config.Charged]
// of out's decision, on a goroutine of its own, so that the answer never
// waits for it. ctx is the request's context: its values reach the store,
// its cancellation does not, since a client gone still pays for what was
// sent. When the meter is held ([Meter.Hold]), the charge waits for its
// release. A charge that fails goes through the Limiter's failure policy,
// which reports it (OnError, the observer, the log).
func (m *Middleware) Charge(ctx context.Context, out Outcome, meter *Meter) {
	if !m.Charging() || !out.Proceed() || len(out.Decision.Results) == 0 {
		return
	}
	d := out.Decision
	ctx = context.WithoutCancel(ctx)
	charge := func() {
		n := meter.Units()
		go func() {
			ctx, cancel := context.WithTimeout(ctx, chargeTimeout)
			defer cancel()
			_, _ = m.charge(ctx, d, n, m.cfg.Charged...)
		}()
	}
	if !meter.later(charge) {
		charge()
	}
}
