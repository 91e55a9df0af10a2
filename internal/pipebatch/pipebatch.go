// Package pipebatch lets concurrent script calls over one go-redis client
// share round trips: the calls that overlap go to Redis in one write and
// come back in one read, which spares Redis most of its per-command I/O
// and the client a connection per call. Over one server (a *redis.Client,
// which a Sentinel failover client is too), the calls of one script in a
// round trip also go as one script run, each call run in turn on its own
// keys and arguments as a function of the script's body, with its own
// reply; over a Cluster or a Ring each call is a script run of its own.
//
// It is for scripts whose calls cannot be merged by what they decide (an
// outbound reservation, ratekit-server's envoy-compatible counters), only
// run one after another: redisstore merges its own algorithms' calls into
// scripts written for many keys instead.
package pipebatch

import (
	"context"
	"errors"
	"slices"
	"sync"

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

// Client is what a Batcher needs of a go-redis client: *redis.Client (a
// Sentinel failover client is one), *redis.ClusterClient and *redis.Ring
// have it. A ClusterClient's or a Ring's pipeline goes to each node its
// calls' keys live on, one round trip to each.
type Client interface {
	Processor
	Pipeline() redis.Pipeliner
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
// Over a *redis.Client the calls of one script in a pipeline go as one
// script run (of at most 1024 keys; more go as several), in the order the
// pipeline would run them: the same writes and replies as one EVALSHA
// each, without the command of each (its parsing, its argument tables,
// its reply's encoding). A merged script's reply must be an array of
// integers, as Do's are. An error the run raises is every call's error,
// though the calls before it in the run did run: a script merged should
// raise none. Ours raise none (they read keys that may hold anything with
// pcall) but Redis's refusal of a write for want of memory, which comes
// only at a run's first write, before any call wrote.
//
// Every call returns by the end of its context. One whose context ends
// while it waits in the queue leaves it, unsent; one whose context ends
// once it was taken (sent in a pipeline, or about to lead one) leaves its
// answer, or its turn to lead, to a goroutine of its own. A pipeline runs
// until the latest deadline of its calls, under the values of the call
// that has it (the marks of redisopt.Divert among them), and none of
// their cancellations, since it answers all of them: over a client that
// keeps deadlines (ContextTimeoutEnabled, or a call marked by a
// redisopt.Divert) it ends by then.
//
// A pipeline may outlive the caller that lent it its context's values (one
// that went when its context was cancelled): a caller must not change what
// its context holds once Do returned with the context's error. A pooled
// tickctx.Ctx qualifies: it carries no cancellation, and goes back to its
// pool only from a call that returned before its deadline, by which time
// any pipeline it was in has been answered.
type Batcher struct {
	client Client
	merge  bool // the client talks to one server: calls of a script merge
	mu     sync.Mutex
	free   int // slots free
	queue  []*call
	closed bool
}

// New returns a Batcher of up to parallel pipelines in flight over client
// (at least one).
func New(client Client, parallel int) *Batcher {
	_, one := client.(*redis.Client)
	return &Batcher{client: client, merge: one, free: max(parallel, 1)}
}

type call struct {
	ctx   context.Context
	src   string
	args  []any
	reply []int64
	err   error
	// batch, when the call is woken to lead, is the pipeline handed to it
	// to send (nil: it is to send what is queued)
	batch []*call
	// wake receives false when the call is answered, true when it is to
	// lead
	wake chan bool
	// alone is the batch of a call sent alone, without an allocation
	alone [1]*call
}

// calls recycles calls: once Do returns, nothing refers to its call (a
// leader sends on wake once and lets go; a call leaves the queue before
// it returns; a call whose caller went is recycled by its orphan).
var calls = sync.Pool{New: func() any { return &call{wake: make(chan bool, 1)} }}

// Do runs args, an EVALSHA of the script whose source is src (see Run),
// in a pipeline it may share with other calls, and returns its reply.
// args is not used once Do returns. After Close, calls go alone.
func (b *Batcher) Do(ctx context.Context, src string, args []any) ([]int64, error) {
	c := calls.Get().(*call)
	c.ctx, c.src, c.args = ctx, src, args
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		recycle(c)
		return Run(ctx, b.client, src, args)
	case b.free > 0 && len(b.queue) == 0:
		b.free--
		b.mu.Unlock()
		c.alone[0] = c
		b.lead(c.alone[:], c)
		return answer(c)
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	for {
		select {
		case lead := <-c.wake:
			if !lead || b.turn(c) {
				return answer(c)
			}
			// it handed its pipeline to a call of a later deadline: it
			// waits for its answer like the others
		case <-ctx.Done():
			if !b.leave(c) {
				// taken: in a pipeline, or about to lead one; a
				// goroutine of its own waits for that, and the caller
				// goes
				go b.orphan(c)
			}
			return nil, ctx.Err()
		}
	}
}

// answer returns c's reply and recycles c.
func answer(c *call) ([]int64, error) {
	reply, err := c.reply, c.err
	recycle(c)
	return reply, err
}

// recycle puts c back in the pool.
func recycle(c *call) {
	*c = call{wake: c.wake}
	calls.Put(c)
}

// orphan waits for the answer of c, whose caller went when its context
// ended after c was taken, leading what c is to lead meanwhile.
func (b *Batcher) orphan(c *call) {
	for <-c.wake {
		if b.turn(c) {
			break
		}
	}
	recycle(c)
}

// turn is c's turn to lead: it sends the pipeline handed to it, or else
// takes what is queued (up to MaxBatch calls with c) and sends it, unless
// another of those calls has a later deadline (or none): that one is
// handed the pipeline, so that a leader, which waits for the pipeline's
// answer however long its own deadline, is the last to give up on it. It
// reports whether c led (and so is answered).
func (b *Batcher) turn(c *call) (led bool) {
	batch := c.batch
	c.batch = nil
	if batch == nil {
		b.mu.Lock()
		n := min(len(b.queue), MaxBatch-1)
		batch = append(slices.Clone(b.queue[:n]), c)
		clear(b.queue[:n])
		b.queue = b.queue[n:]
		b.mu.Unlock()
		if l := latestOf(batch, c); l != c {
			l.batch = batch
			l.wake <- true
			return false
		}
	}
	b.lead(batch, c)
	return true
}

// latestOf returns the call of batch with the latest deadline, or one
// without a deadline; c unless another's is later.
func latestOf(batch []*call, c *call) *call {
	best := c
	at, ok := c.ctx.Deadline()
	if !ok {
		return c
	}
	for _, q := range batch {
		d, ok := q.ctx.Deadline()
		if !ok {
			return q
		}
		if d.After(at) {
			best, at = q, d
		}
	}
	return best
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

// lead sends batch in one round trip, answers its calls but self (whose
// answer self's goroutine reads), and hands the slot on to the first
// queued call, or frees it.
func (b *Batcher) lead(batch []*call, self *call) {
	b.send(batch, self)
	for _, q := range batch {
		if q != self {
			q.wake <- false
		}
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

// send runs batch's scripts in one pipeline (see units: over one server,
// the calls of one script in one run), and those Redis does not know yet
// by EVAL in a second. The pipeline runs under the context of self, the
// leader, whose deadline is the latest of batch's (see turn): its values
// and deadline, without its cancellation.
func (b *Batcher) send(batch []*call, self *call) {
	if len(batch) == 1 {
		c := batch[0]
		c.reply, c.err = Run(c.ctx, b.client, c.src, c.args)
		return
	}
	ctx := context.WithoutCancel(self.ctx)
	if at, ok := self.ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, at)
		defer cancel()
	}
	b.sendUnits(ctx, units(batch, b.merge))
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
