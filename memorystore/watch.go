package memorystore

import "sync"

// watchers are the functions that hear of a Store's resets.
type watchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(string)
}

// add registers fn and returns the function that removes it; it waits for
// calls of fn in progress, which run under the lock.
func (w *watchers) add(fn func(string)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = make(map[int]func(string))
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		delete(w.fns, id)
		w.mu.Unlock()
	}
}

// tell calls every watcher with key.
func (w *watchers) tell(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.fns {
		fn(key)
	}
}
