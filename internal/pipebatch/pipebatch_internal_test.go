package pipebatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
)

// echoSrc counts its calls on its key and replies its argument and the
// count.
const echoSrc = "return {tonumber(ARGV[1]), redis.call('INCR', KEYS[1])}"

// holdSrc is the script of the held call: another script, so that echo's
// first pipeline meets a Redis that does not know echo yet.
const holdSrc = "return {-1, redis.call('INCR', KEYS[1])}"

var (
	echoSHA = redis.NewScript(echoSrc).Hash()
	holdSHA = redis.NewScript(holdSrc).Hash()
)

func echoArgs(key string, n int) []any { return []any{"evalsha", echoSHA, 1, key, n} }

// gate is a hook that holds the first command sent alone until it is
// opened, and records the pipelines it sees: their sizes, contexts and
// errors.
type gate struct {
	open chan struct{}
	held atomic.Bool
	// onPipeline, when set, runs before each pipeline goes out
	onPipeline func(ctx context.Context)
	mu         sync.Mutex
	pipelines  []int
	ctxs       []context.Context
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.held.CompareAndSwap(false, true) {
			<-g.open
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n != "evalsha" && n != "eval" {
			return next(ctx, cmds) // a connection's set-up
		}
		g.mu.Lock()
		g.pipelines = append(g.pipelines, len(cmds))
		g.ctxs = append(g.ctxs, ctx)
		g.mu.Unlock()
		if g.onPipeline != nil {
			g.onPipeline(ctx)
		}
		return next(ctx, cmds)
	}
}

// setup starts a redis-server and a Batcher of one slot over a client with
// a gate, which sends each call as a command of its own.
func setup(t *testing.T) (*Batcher, *redis.Client, *gate) {
	t.Helper()
	client := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	g := newGate()
	client.AddHook(g)
	b := New(client, 1)
	// calls of one script go as commands of their own, as over a Cluster
	// or a Ring: merged runs are merge_internal_test.go's
	b.merge = false
	return b, client, g
}

// queued waits until n calls are queued on b.
func queued(t *testing.T, b *Batcher, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := b.Queued()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	reply []int64
	err   error
}

// hold sends one call that the gate holds, with the slot, and returns its
// result's channel.
func hold(b *Batcher, key string) chan result {
	done := make(chan result, 1)
	go func() {
		r, err := b.Do(context.Background(), holdSrc, []any{"evalsha", holdSHA, 1, key})
		done <- result{r, err}
	}()
	return done
}

// The calls that queue while the slot is taken go out together, in one
// pipeline, each with its own reply; the script unknown to Redis the first
// time (it was never loaded) is sent again by EVAL.
func TestQueuedCallsShareAPipeline(t *testing.T) {
	b, _, g := setup(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	const n = 20
	answers := make([]chan result, n)
	for i := range n {
		answers[i] = make(chan result, 1)
		go func() {
			r, err := b.Do(context.Background(), echoSrc, echoArgs(fmt.Sprint("k", i%4), i))
			answers[i] <- result{r, err}
		}()
	}
	queued(t, b, n)
	close(g.open)
	if a := <-first; a.err != nil || a.reply[0] != -1 || a.reply[1] != 1 {
		t.Fatalf("the first call: %v, %v", a.reply, a.err)
	}
	counts := make(map[int64]bool)
	for i := range n {
		a := <-answers[i]
		if a.err != nil || len(a.reply) != 2 || a.reply[0] != int64(i) {
			t.Fatalf("call %d: %v, %v", i, a.reply, a.err)
		}
		if counts[int64(i%4)*100+a.reply[1]] {
			t.Errorf("call %d: count %d on k%d twice", i, a.reply[1], i%4)
		}
		counts[int64(i%4)*100+a.reply[1]] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// the pipeline of 20 EVALSHAs, then the 20 EVALs of the unknown script
	if len(g.pipelines) != 2 || g.pipelines[0] != n || g.pipelines[1] != n {
		t.Errorf("pipelines of %v calls, want [%d %d]", g.pipelines, n, n)
	}
}

// A call whose context ends while it is queued leaves the queue and is
// never sent; the others are answered.
func TestQueuedCallLeavesUnsent(t *testing.T) {
	b, client, g := setup(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := b.Do(ctx, echoSrc, echoArgs("gone", 1))
		gone <- err
	}()
	stays := make(chan result, 1)
	go func() {
		r, err := b.Do(context.Background(), echoSrc, echoArgs("stays", 2))
		stays <- result{r, err}
	}()
	queued(t, b, 2)
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled call still waits a minute later")
	}
	queued(t, b, 1)
	close(g.open)
	if a := <-first; a.err != nil {
		t.Fatal(a.err)
	}
	if a := <-stays; a.err != nil || a.reply[0] != 2 {
		t.Fatalf("the call that stayed: %v, %v", a.reply, a.err)
	}
	if n, err := client.Exists(context.Background(), "gone").Result(); err != nil || n != 0 {
		t.Errorf("the cancelled call ran: EXISTS gone = %d, %v", n, err)
	}
}

type valueKey struct{}

// A pipeline ends at the latest deadline of its calls, carries that call's
// values, and none of their cancellations: it goes on when calls in it are
// cancelled, and answers the others.
func TestPipelineContext(t *testing.T) {
	b, _, g := setup(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	now := time.Now()
	// the first queued call leads, and comes last in its pipeline: the
	// latest deadline is neither the first call's nor the last's
	deadlines := []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 90 * time.Minute}
	var cancels []context.CancelFunc
	answers := make([]chan result, len(deadlines))
	for i, d := range deadlines {
		ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), valueKey{}, i), now.Add(d))
		cancels = append(cancels, cancel)
		answers[i] = make(chan result, 1)
		go func() {
			r, err := b.Do(ctx, echoSrc, echoArgs("c", i))
			answers[i] <- result{r, err}
		}()
		queued(t, b, i+1)
	}
	// the calls are taken, then two are cancelled, before the pipeline
	// reaches Redis: the pipeline goes on
	var (
		once   sync.Once
		during error
	)
	g.onPipeline = func(ctx context.Context) {
		once.Do(func() {
			cancels[1]()
			cancels[0]()
			during = ctx.Err()
		})
	}
	close(g.open)
	<-first
	for i := range deadlines {
		a := <-answers[i]
		if i <= 1 && errors.Is(a.err, context.Canceled) {
			continue // it went
		}
		if a.err != nil || a.reply[0] != int64(i) {
			t.Errorf("call %d: %v, %v", i, a.reply, a.err)
		}
	}
	if during != nil {
		t.Errorf("the pipeline's context once two of its calls were cancelled: %v, want nil", during)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// the EVALSHAs, and again by EVAL: one context
	if len(g.ctxs) != 2 || g.ctxs[0] != g.ctxs[1] {
		t.Fatalf("%d pipelines, want 2 of one context", len(g.ctxs))
	}
	ctx := g.ctxs[0]
	if d, ok := ctx.Deadline(); !ok || !d.Equal(now.Add(3*time.Hour)) {
		t.Errorf("the pipeline's deadline: %v, %v; want the latest call's, %v", d, ok, now.Add(3*time.Hour))
	}
	if v := ctx.Value(valueKey{}); v != 2 {
		t.Errorf("the pipeline's value: %v, want the latest call's, 2", v)
	}
	for _, c := range cancels {
		c()
	}
}

// Close fails the calls queued; the call in flight is answered, and calls
// after Close go alone.
func TestClose(t *testing.T) {
	b, _, g := setup(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := b.Do(context.Background(), echoSrc, echoArgs("w", 1))
		waiting <- err
	}()
	queued(t, b, 1)
	b.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Errorf("a queued call at Close: %v, want ErrClosed", err)
	}
	close(g.open)
	if a := <-first; a.err != nil {
		t.Errorf("the call in flight at Close: %v", a.err)
	}
	if r, err := b.Do(context.Background(), echoSrc, echoArgs("after", 7)); err != nil || r[0] != 7 {
		t.Errorf("a call after Close: %v, %v", r, err)
	}
}

// Many goroutines at once: every call answered once, with its own reply,
// and Redis counts each call once.
func TestConcurrentCalls(t *testing.T) {
	client := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	b := New(client, 2)
	b.merge = false
	concurrentCalls(t, b, client)
}

func concurrentCalls(t *testing.T, b *Batcher, client *redis.Client) {
	const goroutines, each = 32, 200
	var wg sync.WaitGroup
	for gi := range goroutines {
		wg.Go(func() {
			for i := range each {
				n := gi*each + i
				r, err := b.Do(context.Background(), echoSrc, echoArgs("all", n))
				if err != nil || r[0] != int64(n) {
					t.Errorf("call %d: %v, %v", n, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n, err := client.Get(context.Background(), "all").Int(); err != nil || n != goroutines*each {
		t.Errorf("Redis counted %d calls (%v), want %d", n, err, goroutines*each)
	}
}

// stallPipelines makes the gate hold the first pipeline of scripts until
// the returned release is called, and returns a channel closed once that
// pipeline is held.
func stallPipelines(g *gate) (held <-chan struct{}, release func()) {
	entered, stall := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g.onPipeline = func(context.Context) {
		once.Do(func() {
			close(entered)
			<-stall
		})
	}
	return entered, func() { close(stall) }
}

// A call whose context ends once its pipeline is out returns at once,
// though the pipeline is not answered; the first call queued, whose
// deadline is the earliest, hands its pipeline to the call without a
// deadline (the latest), and so can go too. The pipeline still answers the others, and
// its slot comes back.
func TestTakenCallGoesAtItsEnd(t *testing.T) {
	b, client, g := setup(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	held, release := stallPipelines(g)
	now := time.Now()
	type queuedCall struct {
		key    string
		cancel context.CancelFunc
		done   chan result
	}
	var qs []queuedCall
	// the earliest deadline first: it is woken to lead, and hands over to
	// the call without one
	for i, d := range []time.Duration{time.Hour, 0, 2 * time.Hour} {
		ctx, cancel := context.WithCancel(context.Background()) // no deadline, the latest
		if d > 0 {
			ctx, cancel = context.WithDeadline(context.Background(), now.Add(d))
		}
		q := queuedCall{fmt.Sprint("q", i), cancel, make(chan result, 1)}
		qs = append(qs, q)
		go func() {
			r, err := b.Do(ctx, echoSrc, echoArgs(q.key, i))
			q.done <- result{r, err}
		}()
		queued(t, b, i+1)
	}
	close(g.open)
	if a := <-first; a.err != nil {
		t.Fatal(a.err)
	}
	<-held
	for _, i := range []int{0, 2} { // the first queued and one in the middle
		qs[i].cancel()
		select {
		case a := <-qs[i].done:
			if !errors.Is(a.err, context.Canceled) {
				t.Errorf("call %d, cancelled in its pipeline: %v, %v; want context.Canceled", i, a.reply, a.err)
			}
		case <-time.After(time.Minute):
			release()
			t.Fatalf("call %d, cancelled in its pipeline, still waits a minute later", i)
		}
	}
	release()
	if a := <-qs[1].done; a.err != nil || a.reply[0] != 1 {
		t.Errorf("the call that led: %v, %v", a.reply, a.err)
	}
	qs[1].cancel()
	for _, q := range qs {
		// sent, though their callers went
		if n, err := client.Get(context.Background(), q.key).Int(); err != nil || n != 1 {
			t.Errorf("%s ran %d times (%v), want once", q.key, n, err)
		}
	}
	// the slot came back: a call goes out alone again
	if r, err := b.Do(context.Background(), echoSrc, echoArgs("after", 9)); err != nil || r[0] != 9 {
		t.Errorf("a call afterwards: %v, %v", r, err)
	}
	if n := b.Queued(); n != 0 {
		t.Errorf("%d calls left queued", n)
	}
}

// Calls whose contexts end at random, in the queue, in a pipeline or as
// it comes back: every call returns, with its own reply or its context's
// error, no slot is lost, and calls afterwards are answered.
func TestCallsGoingAtRandom(t *testing.T) {
	client := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	const parallel = 2
	b := New(client, parallel)
	const goroutines, each = 32, 100
	var wg sync.WaitGroup
	var answered, ended atomic.Int64
	for gi := range goroutines {
		wg.Go(func() {
			for i := range each {
				n := gi*each + i
				ctx, cancel := context.WithCancel(context.Background())
				if n%3 != 0 {
					time.AfterFunc(time.Duration(n%7)*50*time.Microsecond, cancel)
				}
				r, err := b.Do(ctx, echoSrc, echoArgs(fmt.Sprint("r", n%16), n))
				cancel()
				switch {
				case err == nil && r[0] == int64(n):
					answered.Add(1)
				case errors.Is(err, context.Canceled):
					ended.Add(1)
				default:
					t.Errorf("call %d: %v, %v", n, r, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d answered, %d went when their contexts ended", answered.Load(), ended.Load())
	// the orphans of calls that went give their slots back
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		free, queued := b.free, len(b.queue)
		b.mu.Unlock()
		if free == parallel && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute on: %d slots free of %d, %d calls queued", free, parallel, queued)
		}
	}
	for i := range 2 * parallel {
		if r, err := b.Do(context.Background(), echoSrc, echoArgs("after", i)); err != nil || r[0] != int64(i) {
			t.Errorf("a call afterwards: %v, %v", r, err)
		}
	}
}

// A call whose caller went once it was taken, and which is then woken to
// lead, leads all the same: its orphan sends it with what is queued.
func TestOrphanLeads(t *testing.T) {
	client := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	b := New(client, 1)
	b.free = 0 // a pipeline is out
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := calls.Get().(*call)
	c.ctx, c.src, c.args = ctx, echoSrc, echoArgs("orphan", 1)
	b.queue = append(b.queue, c)
	// taken from the queue to lead, as the pipeline out hands its slot on,
	// after its caller went
	b.queue = b.queue[1:]
	orphaned := make(chan struct{})
	go func() {
		b.orphan(c)
		close(orphaned)
	}()
	behind := make(chan result, 1)
	go func() {
		r, err := b.Do(context.Background(), echoSrc, echoArgs("behind", 2))
		behind <- result{r, err}
	}()
	queued(t, b, 1)
	c.wake <- true
	select {
	case a := <-behind:
		if a.err != nil || a.reply[0] != 2 {
			t.Fatalf("the call queued behind the orphan: %v, %v", a.reply, a.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the call queued behind the orphan still waits a minute later: nobody led")
	}
	if n, err := client.Get(context.Background(), "orphan").Int(); err != nil || n != 1 {
		t.Errorf("the orphan ran %d times (%v), want once", n, err)
	}
	// the leader answers the calls it sent, then frees the slot: wait
	// until the orphan's goroutine, which led, is done
	select {
	case <-orphaned:
	case <-time.After(time.Minute):
		t.Fatal("the orphan's goroutine still runs a minute after its pipeline was answered")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free != 1 || len(b.queue) != 0 {
		t.Errorf("after the orphan's pipeline: %d slots free, %d calls queued; want 1 and 0", b.free, len(b.queue))
	}
}
