package inflight

import "sync"

// localSlots counts the slots taken in this process, per key, while the
// Limiter decides without Redis under core.FailLocal. A key whose count
// falls to zero is dropped, so the map holds only keys in flight.
type localSlots struct {
	mu   sync.Mutex
	held map[string]int
}

// acquire takes a slot of key if fewer than limit are taken, and returns
// the count after the call.
func (s *localSlots) acquire(key string, limit int) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.held[key]
	if n >= limit {
		return n, false
	}
	s.held[key] = n + 1
	return n + 1, true
}

// release gives a slot of key back.
func (s *localSlots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.held[key]; n > 1 {
		s.held[key] = n - 1
	} else {
		delete(s.held, key)
	}
}
