// Package pipebatch lets concurrent script calls over one *redis.Client
// share pipelined round trips: each call is still one script run of its
// own, with its own reply, but the calls that overlap go to Redis in one
// write and come back in one read, which spares Redis most of its
// per-command I/O and the client a connection per call.
//
// It is for scripts whose calls cannot be merged into one script run (an
// outbound reservation, ratekit-server's envoy-compatible counters):
// redisstore batches its own algorithms into shared script runs instead.
package pipebatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by calls that were queued when the Batcher closed.
var ErrClosed = errors.New("ratekit: pipebatch: closed")

// MaxBatch bounds the calls of one pipeline.
const MaxBatch = 128

// Processor is the Process method of go-redis's clients.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run sends args, an EVALSHA of a script whose source is src ("evalsha",
// sha, numkeys, keys..., args...), on its own, and reads its reply, an
// array of integers; when Redis does not know the script, it sends it
// again by EVAL, which loads it. args is not used once Run returns.
func Run(ctx context.Context, proc Processor, src string, args []any) ([]int64, error) {
	cmd := newCmd(ctx, args)
	err := proc.Process(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = newCmd(ctx, evalArgs(src, args))
		err = proc.Process(ctx, cmd)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// newCmd is a script call of args whose first key, when it has one, is
// args[3], so that a ClusterClient routes it by its key.
func newCmd(ctx context.Context, args []any) *redis.IntSliceCmd {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// evalArgs turns EVALSHA's arguments into EVAL's of src.
func evalArgs(src string, args []any) []any {
	ev := slices.Clone(args)
	ev[0], ev[1] = "eval", src
	return ev
}

// Batcher shares pipelined round trips among concurrent calls, without a
// timer and without a goroutine of its own: a call that finds one of the
// parallel slots free and nothing queued goes out at once, alone, on its
// own goroutine, so that a lone caller pays nothing for batching; calls
// that come while every slot is busy queue. When a pipeline returns, its
// leader hands the slot to the first queued call, which sends everything
// queued by then (up to MaxBatch calls) as the next pipeline.
//
// A call keeps its own deadline while it waits in the queue: one whose
// context ends there leaves it, unsent. Once sent, it waits for its
// answer: a pipeline runs until the latest deadline of its calls, under
// the values of the call that has it (the marks of redisopt.Divert among
// them), and none of their cancellations, since it answers all of them.
// A client that keeps deadlines (ContextTimeoutEnabled, or a call marked
// by a redisopt.Divert) therefore returns every call by about its
// deadline: the calls of one pipeline started close together.
type Batcher struct {
	client *redis.Client
	mu     sync.Mutex
	free   int // slots free
	queue  []*call
	closed bool
}

// New returns a Batcher of up to parallel pipelines in flight over client
// (at least one).
func New(client *redis.Client, parallel int) *Batcher {
	return &Batcher{client: client, free: max(parallel, 1)}
}

type call struct {
	ctx   context.Context
	src   string
	args  []any
	reply []int64
	err   error
	// wake receives false when the call is answered, true when it is to
	// lead the queue
	wake chan bool
}

// calls recycles calls: once Do returns, nothing refers to its call (a
// leader sends on wake once and lets go; a call leaves the queue before
// it returns).
var calls = sync.Pool{New: func() any { return &call{wake: make(chan bool, 1)} }}

// Do runs args, an EVALSHA of the script whose source is src (see Run),
// in a pipeline it may share with other calls, and returns its reply.
// args is not used once Do returns. After Close, calls go alone.
func (b *Batcher) Do(ctx context.Context, src string, args []any) ([]int64, error) {
	c := calls.Get().(*call)
	c.ctx, c.src, c.args = ctx, src, args
	defer func() {
		*c = call{wake: c.wake}
		calls.Put(c)
	}()
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return Run(ctx, b.client, src, args)
	case b.free > 0 && len(b.queue) == 0:
		b.free--
		b.mu.Unlock()
		b.lead(c, nil)
		return c.reply, c.err
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	var lead bool
	select {
	case lead = <-c.wake:
	case <-ctx.Done():
		if b.leave(c) {
			return nil, ctx.Err()
		}
		lead = <-c.wake // taken already: its answer or its turn comes at once
	}
	if lead {
		b.mu.Lock()
		n := min(len(b.queue), MaxBatch-1)
		rest := slices.Clone(b.queue[:n])
		clear(b.queue[:n])
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.lead(c, rest)
	}
	return c.reply, c.err
}

// Queued returns how many calls wait in the queue.
func (b *Batcher) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// leave takes c out of the queue, and reports whether it was still there.
func (b *Batcher) leave(c *call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, c)
	if i < 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	return true
}

// lead sends c and rest in one round trip, answers rest, and hands the
// slot on to the first queued call, or frees it.
func (b *Batcher) lead(c *call, rest []*call) {
	b.send(append(rest, c))
	for _, q := range rest {
		q.wake <- false
	}
	b.mu.Lock()
	if len(b.queue) > 0 && !b.closed {
		next := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.mu.Unlock()
		next.wake <- true
		return
	}
	b.free++
	b.mu.Unlock()
}

// send runs batch's scripts in one pipeline, and those Redis does not know
// yet by EVAL in a second.
func (b *Batcher) send(batch []*call) {
	if len(batch) == 1 {
		c := batch[0]
		c.reply, c.err = Run(c.ctx, b.client, c.src, c.args)
		return
	}
	ctx, cancel := latest(batch)
	defer cancel()
	cmds := make([]*redis.IntSliceCmd, len(batch))
	pipe := b.client.Pipeline()
	for i, c := range batch {
		cmds[i] = newCmd(ctx, c.args)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := b.client.Pipeline()
		for _, i := range again {
			cmds[i] = newCmd(ctx, evalArgs(batch[i].src, batch[i].args))
			_ = pipe.Process(ctx, cmds[i])
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, c := range batch {
		c.reply, c.err = cmds[i].Result()
	}
}

// latest returns the context of a pipeline of batch's calls: it carries
// the values of the call with the latest deadline and ends at that
// deadline (never, if one of the calls has none), and carries none of
// their cancellations.
func latest(batch []*call) (context.Context, context.CancelFunc) {
	var (
		at  time.Time
		top context.Context
	)
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(c.ctx))
		}
		if top == nil || d.After(at) {
			at, top = d, c.ctx
		}
	}
	return context.WithDeadline(context.WithoutCancel(top), at)
}

// Close fails the calls queued with ErrClosed; later calls go alone.
// Pipelines in flight are answered.
func (b *Batcher) Close() {
	b.mu.Lock()
	q := b.queue
	b.queue, b.closed = nil, true
	b.mu.Unlock()
	for _, c := range q {
		c.err = ErrClosed
		c.wake <- false
	}
}
