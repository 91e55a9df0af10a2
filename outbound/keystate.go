package outbound

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// keyState is what this process knows of one key: the pauses it has heard
// of, the end of the fleet's schedule as last seen, and its local limiter
// while Redis cannot decide.
type keyState struct {
	key  string // the storage key
	refs int    // callers using it; guarded by Limiter.mu

	mu         sync.Mutex
	pauseUntil time.Time     // no turn of the key before it (local clock)
	notify     chan struct{} // closed when pauseUntil grows; made when a sleeper first asks (see paused)
	horizon    time.Time     // the latest time to act the fleet had handed out, as last seen
	local      *rate.Limiter // this process's share while Redis cannot decide; nil otherwise
	localShare int           // the fleet size local was made for
	localStart time.Time     // local hands out no turn before it
	localEnd   time.Time     // the latest turn local handed out
	localIV    time.Duration // local's interval
}

// acquire returns the state of the storage key, creating it; release it
// when done.
func (l *Limiter) acquire(key string) *keyState {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	if ks == nil {
		ks = &keyState{key: key}
		l.keys[key] = ks
	}
	ks.refs++
	return ks
}

// release drops a reference to ks; a state nobody uses, with nothing left
// to remember, is forgotten.
func (l *Limiter) release(ks *keyState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks.refs--
	if ks.refs == 0 && ks.idle(l.now()) {
		delete(l.keys, ks.key)
	}
}

// lookup returns the state of the storage key if this process has one.
func (l *Limiter) lookup(key string) *keyState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys[key]
}

// sweep forgets the states nobody uses that have nothing left to remember.
func (l *Limiter) sweep() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ks := range l.keys {
		if ks.refs == 0 && ks.idle(now) {
			delete(l.keys, k)
		}
	}
}

// idle reports whether every time ks remembers has passed.
func (ks *keyState) idle(now time.Time) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return !ks.pauseUntil.After(now) && !ks.horizon.After(now) && !ks.localEnd.After(now)
}

// notePause records that the key is paused until until, waking the
// sleepers of this process if that is later than known.
func (ks *keyState) notePause(until time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if !until.After(ks.pauseUntil) {
		return
	}
	ks.pauseUntil = until
	if ks.notify != nil {
		close(ks.notify)
		ks.notify = nil
	}
}

// paused returns the end of the latest pause known and a channel closed
// when a later one becomes known. The channel is made here, so that the
// turns nobody sleeps on in this process (Reserve's) cost none.
func (ks *keyState) paused() (time.Time, <-chan struct{}) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.notify == nil {
		ks.notify = make(chan struct{})
	}
	return ks.pauseUntil, ks.notify
}

// noteHorizon records the latest time to act the fleet handed out.
func (ks *keyState) noteHorizon(t time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if t.After(ks.horizon) {
		ks.horizon = t
	}
}

// degraded reports whether ks has a local limiter: turns were taken
// without Redis that may not have passed.
func (ks *keyState) degraded() bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.local != nil
}
