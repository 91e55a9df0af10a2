package core

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by a store that has been closed.
var ErrClosed = errors.New("ratekit: store closed")

// pipeliner is what batching needs of a client: *redis.Client,
// *redis.ClusterClient and *redis.Ring all have it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// batcher coalesces concurrent script calls into pipelined round trips.
// While a pipeline slot is free and nothing is queued, a call goes out at
// once from its own goroutine; calls arriving while every slot is busy wait
// for the next pipeline, so a lone caller pays no wait and a crowd shares
// round trips ("natural batching"). maxWait optionally holds a batch open a
// little longer.
type batcher struct {
	client   pipeliner
	direct   redis.Scripter
	in       chan *batchCall
	maxBatch int
	maxWait  time.Duration
	inflight chan struct{} // one token per pipeline in flight
	stop     chan struct{}
	mu       sync.RWMutex // held shared while enqueueing; close takes it to fence
	closed   bool
	wg       sync.WaitGroup
	pool     sync.Pool
}

type batchCall struct {
	ctx    context.Context
	script *redis.Script
	keys   [1]string
	args   [1]any
	many   []string // keys of a multi-key call (keys unused then)
	margs  []any
	reply  any // int64 or string, as the script answers
	err    error
	done   chan struct{}
}

func newBatcher(client pipeliner, direct redis.Scripter, maxBatch, parallel int, maxWait time.Duration) *batcher {
	b := &batcher{
		client:   client,
		direct:   direct,
		in:       make(chan *batchCall, 4*maxBatch),
		maxBatch: maxBatch,
		maxWait:  maxWait,
		inflight: make(chan struct{}, parallel),
		stop:     make(chan struct{}),
	}
	b.pool.New = func() any { return &batchCall{done: make(chan struct{}, 1)} }
	b.wg.Add(1)
	go b.run()
	return b
}

// do runs one call through the next pipeline and returns its reply.
func (b *batcher) do(ctx context.Context, script *redis.Script, c *batchCall) (any, error) {
	select {
	case <-b.stop:
		return nil, ErrClosed
	default:
	}
	// idle: nothing queued and a pipeline slot free, so the call goes out
	// at once on its own, without a hand-off to the batching goroutine
	if len(b.in) == 0 {
		select {
		case b.inflight <- struct{}{}:
			keys, args := c.keys[:], c.args[:]
			if c.many != nil {
				keys, args = c.many, c.margs
			}
			reply, err := script.Run(ctx, b.direct, keys, args...).Result()
			<-b.inflight
			*c = batchCall{done: c.done}
			b.pool.Put(c)
			return reply, err
		default:
		}
	}
	c.ctx, c.script = ctx, script
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case b.in <- c:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		return nil, ctx.Err()
	}
	select {
	case <-c.done:
		reply, err := c.reply, c.err
		*c = batchCall{done: c.done}
		b.pool.Put(c)
		return reply, err
	case <-ctx.Done():
		// the pipeline still answers into c later; c is not reused
		return nil, ctx.Err()
	}
}

func (b *batcher) call() *batchCall { return b.pool.Get().(*batchCall) }

func (b *batcher) run() {
	defer b.wg.Done()
	for {
		var first *batchCall
		select {
		case first = <-b.in:
		case <-b.stop:
			b.drain()
			return
		}
		select {
		case b.inflight <- struct{}{}:
		case <-b.stop:
			b.answer([]*batchCall{first}, ErrClosed)
			b.drain()
			return
		}
		batch := make([]*batchCall, 1, b.maxBatch)
		batch[0] = first
		b.collect(&batch)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.flush(batch)
			<-b.inflight
		}()
	}
}

// collect adds whatever is queued, and with maxWait what arrives within it,
// up to maxBatch calls.
func (b *batcher) collect(batch *[]*batchCall) {
	var deadline <-chan time.Time
	if b.maxWait > 0 {
		t := time.NewTimer(b.maxWait)
		defer t.Stop()
		deadline = t.C
	}
	for len(*batch) < b.maxBatch {
		select {
		case c := <-b.in:
			*batch = append(*batch, c)
			continue
		default:
		}
		if deadline == nil {
			return
		}
		select {
		case c := <-b.in:
			*batch = append(*batch, c)
		case <-deadline:
			return
		case <-b.stop:
			return
		}
	}
}

// flush sends batch in one pipeline; calls answered NOSCRIPT (a server that
// lost its script cache, or a new Cluster master) go again in a second
// pipeline by EVAL, which also loads the script on that server.
func (b *batcher) flush(batch []*batchCall) {
	ctx := batchContext(batch)
	defer ctx.cancel()
	cmds := make([]*redis.Cmd, len(batch))
	p := b.client.Pipeline()
	for i, c := range batch {
		keys, args := c.keys[:], c.args[:]
		if c.many != nil {
			keys, args = c.many, c.margs
		}
		cmds[i] = c.script.EvalSha(ctx, p, keys, args...)
	}
	_, _ = p.Exec(ctx)
	var retry []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		p := b.client.Pipeline()
		for _, i := range retry {
			c := batch[i]
			keys, args := c.keys[:], c.args[:]
			if c.many != nil {
				keys, args = c.many, c.margs
			}
			cmds[i] = c.script.Eval(ctx, p, keys, args...)
		}
		_, _ = p.Exec(ctx)
	}
	for i, c := range batch {
		c.reply, c.err = cmds[i].Result()
		c.done <- struct{}{}
	}
}

type cancelCtx struct {
	context.Context
	cancel context.CancelFunc
}

// batchContext is the context of a pipeline: it carries no caller's
// cancellation (one caller giving up must not fail the others) and ends at
// the latest of the callers' deadlines, if every caller has one.
func batchContext(batch []*batchCall) cancelCtx {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
			return cancelCtx{ctx, cancel}
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
	return cancelCtx{ctx, cancel}
}

func (b *batcher) answer(batch []*batchCall, err error) {
	for _, c := range batch {
		c.err = err
		c.done <- struct{}{}
	}
}

// drain answers every queued call after stop.
func (b *batcher) drain() {
	for {
		select {
		case c := <-b.in:
			b.answer([]*batchCall{c}, ErrClosed)
		default:
			return
		}
	}
}

// close stops the batcher and waits for pipelines in flight.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
	b.drain()
}
