package netdelay

import (
	"container/heap"
	"sync"
	"time"
)

// delayLine wakes waiting chunks at their due times, for every link of the
// process. One goroutine sleeps until the earliest due time, in a system
// call: the runtime's timers wake a sleeper that has nothing else to do up
// to a millisecond late, more than the latency to add, and a sleeping
// system call holds a P, so one sleeper for all links holds at most one
// while every waiting chunk's goroutine is parked. (It is not locked to a
// thread: under load a locked goroutine waits long for its thread to get a
// P back.)
type delayLine struct {
	now   func() time.Time
	sleep func(until time.Time)

	mu      sync.Mutex
	waiting waiters
	kick    chan struct{} // a chunk arrived while the line may be idle
}

func newDelayLine(now func() time.Time, sleep func(time.Time)) *delayLine {
	return &delayLine{now: now, sleep: sleep, kick: make(chan struct{}, 1)}
}

var (
	shared     *delayLine
	sharedOnce sync.Once
)

// sharedLine returns the process's delay line, started on first use.
func sharedLine() *delayLine {
	sharedOnce.Do(func() {
		shared = newDelayLine(time.Now, preciseSleepUntil)
		go shared.run()
	})
	return shared
}

// wait returns at due or soon after; wake is the caller's, with room for
// one value, and empty.
func (d *delayLine) wait(due time.Time, wake chan struct{}) {
	d.mu.Lock()
	heap.Push(&d.waiting, waiter{due, wake})
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default: // a kick is pending already
	}
	<-wake
}

// run wakes waiters as their times come, forever.
func (d *delayLine) run() {
	for {
		d.mu.Lock()
		now := d.now()
		for len(d.waiting) > 0 && !d.waiting[0].due.After(now) {
			heap.Pop(&d.waiting).(waiter).wake <- struct{}{} // never blocks: room for one
		}
		var next time.Time
		if len(d.waiting) > 0 {
			next = d.waiting[0].due
		}
		d.mu.Unlock()
		if next.IsZero() {
			<-d.kick
			continue
		}
		d.sleep(next)
	}
}

type waiter struct {
	due  time.Time
	wake chan<- struct{}
}

// waiters is a min-heap of waiters by due time.
type waiters []waiter

func (w waiters) Len() int           { return len(w) }
func (w waiters) Less(i, j int) bool { return w[i].due.Before(w[j].due) }
func (w waiters) Swap(i, j int)      { w[i], w[j] = w[j], w[i] }
func (w *waiters) Push(x any)        { *w = append(*w, x.(waiter)) }
func (w *waiters) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	return x
}
