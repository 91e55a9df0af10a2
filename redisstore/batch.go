package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/redisopt"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// pipeliner is what batching needs of a client: *redis.Client,
// *redis.ClusterClient and *redis.Ring all have it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// batcher coalesces concurrent script calls into pipelined round trips,
// with no goroutine of its own: a call that finds a pipeline slot it may
// open (one of two, or more while round trips show no queue: see mayOpen)
// sends the calls queued so far (itself among them) from its own goroutine,
// and a call that finds none queues for the next pipeline. When
// a pipeline returns, its leader answers the calls in it and hands the slot
// to one of the queued calls, which leads the next pipeline with everything
// queued by then. A lone caller thus pays no wait and no hand-off, and a
// crowd shares round trips ("natural batching"). maxWait optionally holds a
// pipeline open a little longer before it is sent.
//
// Over a client that does not keep deadlines (a Cluster or Ring client
// without ContextTimeoutEnabled, which ignores the context's deadline on
// the socket; a *redis.Client keeps them through the store's divert), a
// caller must not do the I/O itself, or a stalled server would hold it
// past its deadline: pipelines then go out from senders, goroutines of the
// batcher's own (at most one per slot, parked between pipelines for up to
// senderIdle, then ended, and ended by close), and every caller waits for
// its answer with its context's timer. A sender whose pipeline returned
// sends the next batch itself, so a crowd costs no more hand-offs than
// with callers leading; a lone call costs two (to the sender and back),
// and no goroutine is made per call.
type batcher struct {
	client   pipeliner
	proc     processor // sends a pipeline of one call; nil if the client has none
	maxBatch int
	parallel int
	maxWait  time.Duration
	// oneServer is set when every key is on one server, so that calls
	// of one many-capable script may share a script call whatever their
	// keys; otherwise only calls whose keys share a hash tag do.
	oneServer bool
	// senders is set when pipelines go out from the batcher's senders
	// rather than from callers' goroutines (see batcher).
	senders bool
	work    chan []*batchCall // batches for parked senders; closed by close
	// divert, when set, marks each pipeline's context so that the client
	// keeps its deadline (see Store.divert)
	divert *redisopt.Divert

	mu       sync.Mutex
	idle     sync.Cond    // signalled, under mu, when inflight drops to 0 after close
	pending  []*batchCall // calls waiting for a pipeline, oldest first
	inflight int          // pipelines in flight (slots taken)
	sending  int          // calls in pipelines in flight
	// load is the number of calls in flight or queued as each call that
	// queues sees it, averaged over about loadSmoothing of them, times
	// loadSmoothing (so that integer steps keep their fraction)
	load   int
	parked int // senders waiting on work
	closed bool
	wg     sync.WaitGroup // senders, and goroutines that took over a leader's work
	pool   sync.Pool
	rtt    rttGauge // the pipelines' round trips, which decide whether more may open
	// expiry answers the queued calls whose deadline the batch keeps (see
	// batchCall.until) once that deadline passes; armedAt is the instant
	// it is armed for, in Unix ns (0: not armed)
	expiry  *time.Timer
	armedAt int64
}

// batchCall is one script call through the batcher. The fields up to ctx
// are set by the caller; the replies by the pipeline's leader, before done
// is signalled (or, for the leader's own call, on its own goroutine).
type batchCall struct {
	sc   *script
	args []any // "evalsha", sha, number of keys, keys, arguments
	one  oneKeyArgs
	ctx  context.Context
	// until, when not 0, is the deadline of a context that cannot be
	// cancelled (a Limiter's pooled tickctx.Ctx), in Unix ns, which the
	// batch keeps instead of the caller's select: a queued call is
	// answered at it by the batcher's expiry, a pipeline ends by the
	// earliest such deadline of its calls, and the caller waits on done
	// alone. Selecting on the context too would cost every call a second
	// channel, one that the calls of a tick all share.
	until int64
	// logUnits is the number of sliding-log members the call may add:
	// its cost times its sliding-log checks (see merge).
	logUnits int

	alone [1]*batchCall // the batch of a call sent on its own
	// marked is the context of a pipeline this call is first in, marked
	// for batcher.divert, held here so that marking allocates nothing
	marked redisopt.Marked
	merged *mergedCall  // the script call deciding c with others, if any
	state  uint8        // guarded by batcher.mu
	lead   []*batchCall // a batch this call is to lead, set before done
	self   []*batchCall // a batch this call leads on its own goroutine, from begin to finish
	cmd    redis.Cmder
	ireply int64
	sreply string
	err    error
	done   chan struct{} // buffered: signalled once with the answer or a batch to lead
}

const (
	callQueued uint8 = iota // in batcher.pending
	callTaken               // in a batch, answered or led by someone
)

func newBatcher(client pipeliner, proc processor, maxBatch, parallel int, maxWait time.Duration, oneServer, senders bool) *batcher {
	b := &batcher{
		client:    client,
		proc:      proc,
		maxBatch:  maxBatch,
		parallel:  parallel,
		maxWait:   maxWait,
		oneServer: oneServer,
		senders:   senders,
	}
	if senders {
		b.work = make(chan []*batchCall, parallel)
	}
	b.idle.L = &b.mu
	b.pool.New = func() any { return &batchCall{done: make(chan struct{}, 1)} }
	return b
}

// call returns a batchCall for one decision; do recycles it.
func (b *batcher) call() *batchCall { return b.pool.Get().(*batchCall) }

// oneKey prepares c for sc with one key and a cost of n: the arguments are
// boxed into c's own array, and a cost of 1 is not sent.
func (c *batchCall) oneKey(sc *script, key string, n int) {
	c.sc = sc
	if sc.logUnits {
		c.logUnits = n
	}
	c.one = oneKeyArgs{"evalsha", sc.sha, 1, key, n}
	if n == 1 {
		c.args = c.one[:4]
	} else {
		c.args = c.one[:]
	}
}

// manyKeys prepares c for the generic script sc on checks at cost n, with
// args as Store.manyArgs makes them.
func (c *batchCall) manyKeys(sc *script, args []any, checks []core.Check, n int) {
	c.sc, c.args = sc, args
	args[0], args[1] = "evalsha", sc.sha
	for i := range checks {
		if checks[i].Limit.Algorithm == core.SlidingWindowLog {
			c.logUnits += n
		}
	}
}

func (b *batcher) recycle(c *batchCall) {
	*c = batchCall{done: c.done}
	b.pool.Put(c)
}

// do runs c through a pipeline and returns its reply: an integer or a
// string, as c's script answers.
func (b *batcher) do(ctx context.Context, c *batchCall) (int64, string, error) {
	if !b.begin(ctx, c) {
		return 0, "", core.ErrClosed
	}
	return b.finish(ctx, c)
}

// begin queues c or sends it, and reports whether it did: false once the
// batcher is closed, and c is recycled. A call that is to lead its own
// pipeline (c.self) leads it in finish, which must follow.
func (b *batcher) begin(ctx context.Context, c *batchCall) bool {
	c.ctx = ctx
	if tc, ok := ctx.(*tickctx.Ctx); ok && !b.senders {
		d, _ := tc.Deadline()
		c.until = d.UnixNano()
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.recycle(c)
		return false
	}
	if len(b.pending) == 0 && b.maxWait == 0 && b.mayOpen() {
		// idle: c goes out at once, in a pipeline of its own
		b.inflight++
		b.sending++
		c.state = callTaken
		c.alone[0] = c
		if b.senders {
			b.dispatch(c.alone[:])
		} else {
			c.self = c.alone[:]
		}
		b.mu.Unlock()
		return true
	}
	if batch := b.enqueue(ctx, c); batch != nil && !b.senders {
		if lead := leaderOf(batch); lead == c {
			c.self = batch
		} else {
			lead.lead = batch
			lead.done <- struct{}{}
		}
	}
	return true
}

// finish leads the pipeline c is to lead, or waits for c's answer (see
// await), and returns c's reply.
func (b *batcher) finish(ctx context.Context, c *batchCall) (int64, string, error) {
	var (
		ireply int64
		sreply string
		err    error
	)
	if batch := c.self; batch != nil {
		c.self = nil
		b.lead(batch, c)
		ireply, sreply, err = b.reply(c)
	} else {
		ireply, sreply, err = b.await(ctx, c)
	}
	if err != nil && rediserr.Timeout(err) && !errors.Is(err, core.ErrNotSent) {
		// a pipeline ends at the latest of its callers' deadlines (or the
		// earliest the batch keeps), on its connection, which may time
		// out before ctx's timer closes Done: a caller whose deadline
		// has passed gave up, and is told so the same way each time
		if gaveUp := tickctx.Expired(ctx); gaveUp != nil {
			return 0, "", gaveUp
		}
	}
	return ireply, sreply, err
}

// enqueue queues c, called with b.mu held, and returns with it released.
// When a pipeline slot is free, it takes the slot and returns the batch to
// send, after holding it open up to maxWait (less if ctx ends first); a
// slot whose calls others sent meanwhile is given back.
func (b *batcher) enqueue(ctx context.Context, c *batchCall) []*batchCall {
	c.state = callQueued
	b.pending = append(b.pending, c)
	b.load += b.sending + len(b.pending) - b.load/loadSmoothing
	if c.until != 0 {
		b.arm(c.until)
	}
	if !b.mayOpen() {
		b.mu.Unlock()
		return nil
	}
	b.inflight++
	if b.maxWait > 0 {
		b.mu.Unlock()
		t := time.NewTimer(b.maxWait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		b.mu.Lock()
	}
	batch := b.take()
	switch {
	case batch == nil:
		b.release()
	case b.senders:
		b.dispatch(batch)
	}
	b.mu.Unlock()
	return batch
}

// dispatch hands batch, which holds a slot, to a parked sender, or to a
// new one when none is parked, under b.mu.
func (b *batcher) dispatch(batch []*batchCall) {
	if b.parked > 0 {
		b.parked--
		b.work <- batch // never blocks: it has room for every parked sender
		return
	}
	b.wg.Add(1)
	go b.send(batch)
}

// senderIdle is how long a sender parks for want of work before it ends:
// long enough that calls a few ms apart reuse it, short enough that a
// store nobody closes holds no goroutine for long.
const senderIdle = 100 * time.Millisecond

// send is a sender: it sends batch, answers its calls, and sends what
// queued meanwhile, until handOff gives it nothing to send; then it frees
// the slot and parks until dispatch hands it a batch, for up to
// senderIdle, or close ends it.
func (b *batcher) send(batch []*batchCall) {
	defer b.wg.Done()
	var idle *time.Timer
	for batch != nil {
		sent := time.Now()
		b.flush(batch)
		rtt := time.Since(sent)
		for _, c := range batch {
			c.done <- struct{}{}
		}
		b.mu.Lock()
		batch = b.returned(batch, sent, rtt)
		if batch != nil {
			b.mu.Unlock()
			continue
		}
		b.release()
		closed := b.closed
		if !closed {
			b.parked++
		}
		b.mu.Unlock()
		if closed {
			return
		}
		if idle == nil {
			idle = time.NewTimer(senderIdle)
		} else {
			idle.Reset(senderIdle)
		}
		select {
		case batch = <-b.work: // nil once close closed it
			idle.Stop()
		case <-idle.C:
			// dispatch sends under b.mu, so a batch handed to a parked
			// sender is in b.work by now: take it, or leave
			b.mu.Lock()
			select {
			case batch = <-b.work:
			default:
				b.parked--
			}
			b.mu.Unlock()
		}
	}
}

// await waits for c's answer, or for a batch it is to lead, until ctx
// ends.
func (b *batcher) await(ctx context.Context, c *batchCall) (int64, string, error) {
	if c.until != 0 {
		// the batch keeps c's deadline: its answer, its batch to lead,
		// or its expiry comes by then
		<-c.done
		if c.lead != nil {
			b.lead(c.lead, c)
		}
		return b.reply(c)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if !b.abandon(c) {
			// it spent nothing, which the Limiter's refunds must know
			return 0, "", fmt.Errorf("%w: %w", core.ErrNotSent, ctx.Err())
		}
		return 0, "", ctx.Err()
	}
	if c.lead != nil {
		b.lead(c.lead, c)
	}
	return b.reply(c)
}

// abandon gives up on c for a caller whose context ended, and reports
// whether c was sent: a queued call leaves the queue, unsent; a call in a
// pipeline gets a goroutine of its own that waits for its answer, or for
// the batch it is to lead, and c is not reused.
func (b *batcher) abandon(c *batchCall) (sent bool) {
	b.mu.Lock()
	if c.state == callQueued {
		b.remove(c)
		b.mu.Unlock()
		b.recycle(c)
		return false
	}
	if b.senders {
		// a sender answers c, which leads nothing, and nobody reads it
		b.mu.Unlock()
		return true
	}
	if b.inflight == 0 {
		// every pipeline is answered: so is c, and it leads none
		b.mu.Unlock()
		return true
	}
	// Added under b.mu while a slot is taken, so before close waits.
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		<-c.done
		if c.lead != nil {
			b.lead(c.lead, c)
		}
	}()
	return true
}

// reply returns c's answer and recycles c.
func (b *batcher) reply(c *batchCall) (int64, string, error) {
	ireply, sreply, err := c.ireply, c.sreply, c.err
	b.recycle(c)
	return ireply, sreply, err
}

// take removes up to maxBatch calls from the front of the queue, under
// b.mu; nil if none is queued.
func (b *batcher) take() []*batchCall {
	if b.armedAt != 0 {
		if now := time.Now().UnixNano(); now >= b.armedAt {
			// a call at its deadline is answered, not sent: a pipeline
			// ends by the earliest deadline it keeps
			b.expireQueued(now)
		}
	}
	n := min(len(b.pending), b.maxBatch)
	if n == 0 {
		return nil
	}
	b.sending += n
	var batch []*batchCall
	if n == 1 {
		batch = b.pending[0].alone[:]
	} else {
		batch = make([]*batchCall, n)
	}
	copy(batch, b.pending)
	for _, c := range batch {
		c.state = callTaken
	}
	rest := copy(b.pending, b.pending[n:])
	clear(b.pending[rest:])
	b.pending = b.pending[:rest]
	return batch
}

// remove drops c from the queue, under b.mu.
func (b *batcher) remove(c *batchCall) {
	for i, q := range b.pending {
		if q == c {
			copy(b.pending[i:], b.pending[i+1:])
			b.pending[len(b.pending)-1] = nil
			b.pending = b.pending[:len(b.pending)-1]
			return
		}
	}
}

// leaderOf picks the call of batch that leads it: one that cannot be
// cancelled if any, else one without a deadline, else the one with the
// latest deadline, so that the leader is the last to give up on the
// pipeline and returns by its own deadline.
func leaderOf(batch []*batchCall) *batchCall {
	best := batch[0]
	if len(batch) == 1 {
		return best
	}
	bestD, bestOK := best.ctx.Deadline()
	for _, c := range batch {
		if c.ctx.Done() == nil {
			return c
		}
		d, ok := c.ctx.Deadline()
		if bestOK && (!ok || d.After(bestD)) {
			best, bestD, bestOK = c, d, ok
		}
	}
	return best
}

// lead sends batch, answers every call in it but self (whose answer self's
// goroutine reads), and passes the slot on to the next batch, if calls
// are queued and may have it (see handOff), or frees it.
func (b *batcher) lead(batch []*batchCall, self *batchCall) {
	sent := time.Now()
	b.flush(batch)
	rtt := time.Since(sent)
	for _, c := range batch {
		if c != self {
			c.done <- struct{}{}
		}
	}
	b.mu.Lock()
	next := b.returned(batch, sent, rtt)
	if next == nil {
		b.release()
	}
	b.mu.Unlock()
	if next != nil {
		lead := leaderOf(next)
		lead.lead = next
		lead.done <- struct{}{}
	}
}

// release frees a pipeline slot, under b.mu, and wakes Close when it was
// the last one.
func (b *batcher) release() {
	b.inflight--
	if b.closed && b.inflight == 0 {
		b.idle.Broadcast()
	}
}

// flush sends batch in one pipeline (a lone call by itself), and reads each
// reply as the integer or string its script answers. Calls that can share
// a script call (see merge) go as one. Commands answered NOSCRIPT (a server
// that lost its script cache, or a new Cluster master) go again in a second
// pipeline by EVAL, which also loads the script on that server.
func (b *batcher) flush(batch []*batchCall) {
	ctx := batch[0].ctx
	var merged []*mergedCall
	if len(batch) > 1 {
		cc := batchContext(batch)
		defer cc.cancel()
		ctx = cc
		merged = b.merge(batch)
	}
	if b.divert != nil {
		ctx = batch[0].marked.Set(b.divert, ctx)
	}
	if len(batch) == 1 && b.proc != nil {
		c := batch[0]
		c.cmd = newScriptCmd(ctx, c.sc, c.args)
		_ = b.proc.Process(ctx, c.cmd)
	} else {
		cmds := make([]redis.Cmder, 0, len(batch))
		for _, c := range batch {
			switch m := c.merged; {
			case m == nil:
				c.cmd = newScriptCmd(ctx, c.sc, c.args)
				cmds = append(cmds, c.cmd)
			case m.calls[0] == c:
				// the group goes out where its first call stood
				m.cmd = newScriptCmd(ctx, m.sc, m.args)
				cmds = append(cmds, m.cmd)
			}
		}
		b.exec(ctx, cmds)
	}
	var retry []redis.Cmder
	for _, c := range batch {
		if c.merged == nil && noScript(c.cmd.Err()) {
			c.args[0], c.args[1] = "eval", c.sc.src
			c.cmd = newScriptCmd(ctx, c.sc, c.args)
			retry = append(retry, c.cmd)
		}
	}
	for _, m := range merged {
		if noScript(m.cmd.Err()) {
			m.args[0], m.args[1] = "eval", m.sc.src
			m.cmd = newScriptCmd(ctx, m.sc, m.args)
			retry = append(retry, m.cmd)
		}
	}
	if retry != nil {
		b.exec(ctx, retry)
	}
	for _, c := range batch {
		if c.merged != nil {
			continue
		}
		c.ireply, c.sreply, c.err = scriptReply(c.cmd)
		c.cmd = nil
	}
	for _, m := range merged {
		m.answer()
	}
}

// noScript reports whether err is Redis's NOSCRIPT reply. It asks
// go-redis only about an error: HasErrorPrefix allocates on every call.
func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// exec runs cmds as one pipeline, or a lone command directly.
func (b *batcher) exec(ctx context.Context, cmds []redis.Cmder) {
	if len(cmds) == 1 && b.proc != nil {
		_ = b.proc.Process(ctx, cmds[0])
		return
	}
	p := b.client.Pipeline()
	for _, cmd := range cmds {
		_ = p.Process(ctx, cmd)
	}
	_, _ = p.Exec(ctx)
}

// newScriptCmd returns the command that runs sc with args ("evalsha" or
// "eval", the script, the number of keys, keys, arguments), reading the
// reply as sc answers it.
func newScriptCmd(ctx context.Context, sc *script, args []any) redis.Cmder {
	var cmd interface {
		redis.Cmder
		SetFirstKeyPos(int8)
	}
	switch {
	case sc.manyReply && sc.intReply:
		cmd = redis.NewIntSliceCmd(ctx, args...)
	case sc.manyReply:
		cmd = redis.NewStringSliceCmd(ctx, args...)
	case sc.intReply:
		cmd = redis.NewIntCmd(ctx, args...)
	default:
		cmd = redis.NewStringCmd(ctx, args...)
	}
	cmd.SetFirstKeyPos(3)
	return cmd
}

// scriptReply returns the reply of a command made by newScriptCmd for a
// one-key script: the integer or the string it answered, or its error.
func scriptReply(cmd redis.Cmder) (int64, string, error) {
	switch cmd := cmd.(type) {
	case *redis.IntCmd:
		n, err := cmd.Result()
		return n, "", err
	case *redis.StringCmd:
		s, err := cmd.Result()
		return 0, s, err
	}
	return 0, "", fmt.Errorf("%w: %T command", core.ErrMalformedReply, cmd)
}

// mergedCall is one script call that decides several calls of a batch:
// calls of one one-key script, run through its many variant.
type mergedCall struct {
	sc    *script // the many script
	calls []*batchCall
	args  []any // "evalsha", sha, len(calls), keys, and costs unless all are 1
	cmd   redis.Cmder
}

// merge finds the calls of batch that can share a script call: calls of one
// script that has a many variant, whose keys are on one server, or share
// a hash tag (and so a Cluster slot). It gives each group of two or more a
// mergedCall, and returns them.
//
// Sliding-log calls are held to what bounds one call's time in Redis (see
// core.MaxLogCost and core.MaxLogRate): those that share a script call
// name one key, which is trimmed once, and add at most core.MaxLogCost
// members together; a call of several limits that adds sliding-log members
// is sent alone.
func (b *batcher) merge(batch []*batchCall) []*mergedCall {
	type groupKey struct {
		sc  *script
		tag string
	}
	// a group's first call is remembered by index; a mergedCall is made
	// only once a second call joins it, so that calls with nothing to share
	// (distinct identities on a Cluster) cost no more than a map entry
	var (
		groups map[groupKey]int
		firsts []*batchCall
		ms     []*mergedCall
		units  []int // each group's sliding-log members
		order  []*mergedCall
	)
	for _, c := range batch {
		if c.sc.many == nil || c.logUnits > 0 && c.sc.many.multiKey {
			continue
		}
		gk := groupKey{sc: c.sc}
		switch {
		case c.logUnits > 0:
			gk.tag = c.args[3].(string) // the key itself
		case !b.oneServer:
			gk.tag = storekey.HashTag(c.args[3].(string))
		}
		if groups == nil {
			groups = make(map[groupKey]int)
		}
		i, ok := groups[gk]
		switch {
		case !ok || units[i]+c.logUnits > core.MaxLogCost:
			// a new group, which a full one's later calls join
			groups[gk] = len(firsts)
			firsts = append(firsts, c)
			ms = append(ms, nil)
			units = append(units, c.logUnits)
		case ms[i] == nil:
			ms[i] = &mergedCall{sc: c.sc.many, calls: []*batchCall{firsts[i], c}}
			order = append(order, ms[i])
			units[i] += c.logUnits
		default:
			ms[i].calls = append(ms[i].calls, c)
			units[i] += c.logUnits
		}
	}
	for _, m := range order {
		m.build()
	}
	return order
}

// build writes m's EVALSHA arguments: every call's key, then, if any call
// has a cost above 1, every call's cost; and marks the calls merged in m.
// For a multiKey script: every call's keys, then each call's number of keys
// and the arguments it would have sent alone.
func (m *mergedCall) build() {
	if m.sc.multiKey {
		m.buildMultiKey()
		return
	}
	costs := false
	for _, c := range m.calls {
		costs = costs || len(c.args) > 4
	}
	m.args = make([]any, 3, 3+2*len(m.calls))
	m.args[0], m.args[1], m.args[2] = "evalsha", m.sc.sha, len(m.calls)
	for _, c := range m.calls {
		m.args = append(m.args, c.args[3])
		c.merged = m
	}
	if !costs {
		return
	}
	for _, c := range m.calls {
		if len(c.args) > 4 {
			m.args = append(m.args, c.args[4])
		} else {
			m.args = append(m.args, 1)
		}
	}
}

// buildMultiKey is build for a multiKey script: each call's args are
// "evalsha", sha, its number of keys nk, its keys, then its arguments.
func (m *mergedCall) buildMultiKey() {
	keys, size := 0, 0
	for _, c := range m.calls {
		keys += c.args[2].(int)
		size += len(c.args) - 2
	}
	m.args = make([]any, 3, 3+size)
	m.args[0], m.args[1], m.args[2] = "evalsha", m.sc.sha, keys
	for _, c := range m.calls {
		m.args = append(m.args, c.args[3:3+c.args[2].(int)]...)
		c.merged = m
	}
	for _, c := range m.calls {
		nk := c.args[2].(int)
		m.args = append(m.args, nk)
		m.args = append(m.args, c.args[3+nk:]...)
	}
}

// answer hands each call of m its reply from m's: an integer or a string,
// as m's script answers.
func (m *mergedCall) answer() {
	var (
		ints  []int64
		strs  []string
		n     int
		err   error
		isInt bool
	)
	switch cmd := m.cmd.(type) {
	case *redis.IntSliceCmd:
		ints, err = cmd.Result()
		n, isInt = len(ints), true
	case *redis.StringSliceCmd:
		strs, err = cmd.Result()
		n = len(strs)
	default:
		err = fmt.Errorf("%w: %T command", core.ErrMalformedReply, cmd)
	}
	if err == nil && n != len(m.calls) {
		err = fmt.Errorf("%w: %d replies for %d calls", core.ErrMalformedReply, n, len(m.calls))
	}
	for i, c := range m.calls {
		switch {
		case err != nil:
			c.err = err
		case isInt:
			c.ireply = ints[i]
		default:
			c.sreply = strs[i]
		}
	}
}

// arm makes sure that the batcher's expiry fires by until, under b.mu.
func (b *batcher) arm(until int64) {
	if b.armedAt != 0 && b.armedAt <= until {
		return
	}
	if b.expiry != nil {
		b.expiry.Stop()
	}
	b.armedAt = until
	b.expiry = time.AfterFunc(time.Until(time.Unix(0, until)), b.expire)
}

// expire is the batcher's expiry: it answers the queued calls at their
// deadline and arms itself for the next.
func (b *batcher) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.expireQueued(time.Now().UnixNano())
}

// expireQueued answers, at now, each queued call whose deadline the batch
// keeps and which has passed: it was never sent. It arms the expiry for
// the earliest deadline left. Called under b.mu.
func (b *batcher) expireQueued(now int64) {
	b.armedAt = 0
	var next int64
	kept := b.pending[:0]
	for _, c := range b.pending {
		switch {
		case c.until == 0:
		case c.until <= now:
			c.state = callTaken
			c.err = fmt.Errorf("%w: %w", core.ErrNotSent, context.DeadlineExceeded)
			c.done <- struct{}{}
			continue
		case next == 0 || c.until < next:
			next = c.until
		}
		kept = append(kept, c)
	}
	clear(b.pending[len(kept):])
	b.pending = kept
	if next != 0 {
		b.arm(next)
	}
}

type cancelCtx struct {
	context.Context
	cancel context.CancelFunc
}

// batchContext is the context of a pipeline: it carries no caller's
// cancellation (one caller giving up must not fail the others) and ends at
// the earliest deadline that the batch keeps for its callers (see
// batchCall.until), if any; else at the latest of the callers' deadlines,
// if every caller has one.
func batchContext(batch []*batchCall) cancelCtx {
	var earliest int64
	for _, c := range batch {
		if c.until != 0 && (earliest == 0 || c.until < earliest) {
			earliest = c.until
		}
	}
	if earliest != 0 {
		ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), time.Unix(0, earliest))
		return cancelCtx{ctx, cancel}
	}
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

// close answers every queued call with ErrClosed, stops handing slots on,
// and waits for the pipelines in flight.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	queued := b.pending
	b.pending = nil
	if b.expiry != nil {
		b.expiry.Stop()
		b.expiry, b.armedAt = nil, 0
	}
	for _, c := range queued {
		c.state = callTaken
		c.err = core.ErrClosed
		c.done <- struct{}{}
	}
	if b.senders {
		close(b.work) // parked senders end; busy ones end when their pipeline returns
	}
	for b.inflight > 0 {
		b.idle.Wait()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
