package compat

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by calls queued when the store closed.
var ErrClosed = errors.New("compat: store closed")

// maxBatch bounds the calls of one pipeline.
const maxBatch = 128

// batcher lets concurrent calls share pipelined round trips, without
// waiting on a timer and without a goroutine of its own: a call that finds
// one of the parallel slots free and nothing queued goes out at once, from
// its own goroutine; calls that arrive while every slot is busy queue.
// When a pipeline returns, its sender hands the slot to the first queued
// call, which sends everything queued by then as the next pipeline.
type batcher struct {
	client *redis.Client
	mu     sync.Mutex
	free   int
	queue  []*pending
	closed bool
}

type pending struct {
	ctx   context.Context
	args  []any // EVALSHA's
	reply []int64
	err   error
	// wake receives false when the call is answered, true when it is
	// to send the queue.
	wake chan bool
}

func newBatcher(c *redis.Client, parallel int) *batcher {
	return &batcher{client: c, free: parallel}
}

// pendings recycles calls: once do returns, nothing refers to its call
// (a leader sends on wake once and lets go; a call leaves the queue
// before it returns).
var pendings = sync.Pool{New: func() any { return &pending{wake: make(chan bool, 1)} }}

func (b *batcher) do(ctx context.Context, args []any) ([]int64, error) {
	p := pendings.Get().(*pending)
	p.ctx, p.args = ctx, args
	defer func() {
		*p = pending{wake: p.wake}
		pendings.Put(p)
	}()
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return runScript(ctx, b.client, args)
	case b.free > 0 && len(b.queue) == 0:
		b.free--
		b.mu.Unlock()
		b.lead(p, nil)
		return p.reply, p.err
	}
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	var lead bool
	select {
	case lead = <-p.wake:
	case <-ctx.Done():
		b.mu.Lock()
		for i, q := range b.queue {
			if q == p {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				b.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		b.mu.Unlock()
		lead = <-p.wake // taken already: its answer or its turn comes at once
	}
	if lead {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch-1)
		rest := append([]*pending(nil), b.queue[:n]...)
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.lead(p, rest)
	}
	return p.reply, p.err
}

// lead sends p and rest in one round trip, answers rest, and hands the
// slot on.
func (b *batcher) lead(p *pending, rest []*pending) {
	batch := append(rest, p)
	b.send(batch)
	for _, q := range rest {
		q.wake <- false
	}
	b.mu.Lock()
	if len(b.queue) > 0 && !b.closed {
		next := b.queue[0]
		b.queue = b.queue[1:]
		b.mu.Unlock()
		next.wake <- true
		return
	}
	b.free++
	b.mu.Unlock()
}

// send runs batch's scripts in one pipeline, and those the server does not
// know yet by EVAL in a second.
func (b *batcher) send(batch []*pending) {
	if len(batch) == 1 {
		p := batch[0]
		p.reply, p.err = runScript(p.ctx, b.client, p.args)
		return
	}
	ctx, cancel := latest(batch)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	pipe := b.client.Pipeline()
	for i, p := range batch {
		cmds[i] = redis.NewCmd(ctx, p.args...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := b.client.Pipeline()
		for _, i := range again {
			cmds[i] = redis.NewCmd(ctx, evalArgs(batch[i].args)...)
			_ = pipe.Process(ctx, cmds[i])
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, p := range batch {
		p.reply, p.err = cmds[i].Int64Slice()
	}
}

// latest returns a context that ends at the latest deadline of batch's
// calls, and carries none of their cancellations: the pipeline answers
// every call in it.
func latest(batch []*pending) (context.Context, context.CancelFunc) {
	var at time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(at) {
			at = d
		}
	}
	return context.WithDeadline(context.Background(), at)
}

// close fails the queued calls; later calls go alone.
func (b *batcher) close() {
	b.mu.Lock()
	q := b.queue
	b.queue, b.closed = nil, true
	b.mu.Unlock()
	for _, p := range q {
		p.err = ErrClosed
		p.wake <- false
	}
}
