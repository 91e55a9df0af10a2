package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/redisopt"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// Store is a [core.Store] that keeps limits in Redis and decides each call
// with one atomic Lua script that reads Redis's own clock, so any number of
// processes sharing one Redis share one limit exactly. It is safe for
// concurrent use.
type Store struct {
	client redis.Scripter
	proc   processor // client's Process method; nil if it has none
	// limits caches, per distinct Limit, its compiled single-key script and
	// its boxed arguments for the multi-key scripts: a map that is never
	// changed once stored, replaced by a copy with each new limit (at most
	// maxCompiledLimits times), so that a lookup, made on every call, is a
	// load and a typed map read (a sync.Map of Limit keys hashed the
	// struct through its type descriptor: 3x the time, and 4% of the
	// store's CPU per decision at 256 goroutines). limitsMu serializes
	// the copies.
	limits   atomic.Pointer[map[core.Limit]*limitScripts]
	limitsMu sync.Mutex
	batch    *batcher // decisions' pipelines; nil under WithoutBatching or over a client without Pipeline
	// quotas batches peeks and refunds apart from decisions (nil when
	// batch is): a refund in the background of a call that missed its
	// deadline has ten times a decision's, and during a latency spike such
	// refunds would otherwise hold the pipeline slots that live decisions
	// wait for
	quotas *batcher

	// cluster is client when it is a *redis.ClusterClient, else nil.
	cluster *redis.ClusterClient
	// routed is set once a call has answered through cluster, which has
	// then loaded its slot map.
	routed atomic.Bool
	// reloaded is when a failed call last asked cluster to reload its
	// slot map, in ns since born.
	reloaded atomic.Int64
	born     time.Time
	resets   resetHub // reset watchers' subscription
	// keeps is set when the client keeps deadlines itself
	// (ContextTimeoutEnabled), or divert keeps them; see Traits.
	keeps bool
	// divert keeps the deadlines of calls through a *redis.Client without
	// ContextTimeoutEnabled on the caller's goroutine: calls made with a
	// context it marked go out through a view of the client that keeps
	// them. nil for any other client.
	divert *redisopt.Divert
	// detached counts the calls that run on a goroutine of their own
	// because the client does not keep deadlines (see bounded); Close
	// waits for them.
	detached sync.WaitGroup
}

// maxCompiledLimits bounds how many distinct limits get scripts of their
// own; calls with further limits run the generic scripts.
const maxCompiledLimits = 256

type limitScripts struct {
	single *script
	args   [4]any // algorithm, rate, period in ms, burst
}

// script is a Lua script with its EVALSHA and EVAL arguments boxed once.
type script struct {
	*redis.Script
	sha, src any
	intReply bool // one integer (see singleIntReply), else one string
	// manyReply marks a many script: an array of replies, integers if
	// intReply, else strings.
	manyReply bool
	// multiKey marks a many script whose calls may have several keys
	// (decide_many.lua): it takes every call's keys, then per call its
	// number of keys and its arguments.
	multiKey bool
	// logUnits marks a one-key sliding-log script, whose calls add a
	// member per unit they spend (see batcher.merge).
	logUnits bool
	// many decides several calls of this script in one script call,
	// answering an array of its replies, for a batching store: set for the
	// decide scripts (decide_many.lua) and for a one-key script whose
	// algorithm has a many script; nil otherwise, and for a one-key script
	// of a store that does not batch.
	many *script
}

func newScript(src string, intReply bool) *script {
	s := redis.NewScript(src)
	return &script{Script: s, sha: s.Hash(), src: src, intReply: intReply}
}

// processor is the method through which Store sends its scripts when
// the client has it (*redis.Client, *redis.ClusterClient and *redis.Ring
// do): it runs the client's hooks like any command, and lets the reply be
// read as the integer or string it is, without the boxing and argument
// copies of the generic EvalSha.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// New returns a store over client: a *redis.Client,
// *redis.ClusterClient, *redis.Ring, a failover client, or anything else
// that runs scripts. The client's pool, TLS, timeouts and hooks apply
// unchanged; Store never closes it. Over a *redis.Client without
// ContextTimeoutEnabled, whose sockets ignore the context's deadline, New
// adds a hook to the client, after the hooks it has, that sends the
// store's calls, and only those, through a clone of the client over the
// same pool with ContextTimeoutEnabled set, so that they keep their
// deadlines on the caller's goroutine (see Traits); hooks added to the
// client after New do not see the store's calls.
//
// Scripts run by EVALSHA and fall back to EVAL when the server does not know
// them yet (after a restart or failover), so nothing needs loading first.
// Each distinct limit (up to 256 of them) gets a script of its own with the
// limit compiled in, so a call sends only the key and the cost.
//
// Over a *redis.Client (one server, or a Sentinel-watched master),
// concurrent calls share pipelined round trips by default ([WithBatching]):
// a call that finds nothing in flight goes out at once, so a lone caller
// waits for nothing; [WithoutBatching] sends each call by itself. Over a
// Cluster or Ring client batching is off unless WithBatching asks for it:
// a pipeline there spans servers and returns when the slowest does, so a
// failing master would hold up the calls of the healthy ones.
//
// New asks the server INFO server, within a second, and refuses one that
// reports a redis_version older than 6.2 with an error wrapping
// [ErrServerTooOld]; a server that does not answer, or refuses INFO, is
// not checked (Valkey reports a redis_version of 7.2.4 and passes).
//
// New takes [WithBatching] and [WithoutBatching], and returns an
// error for a nil client, for any other option, and for WithBatching over
// a client without a Pipeline method.
func New(client redis.Scripter, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("ratekit: redisstore.New: nil client")
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: redisstore.New: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := checkVersion(client); err != nil {
		return nil, fmt.Errorf("ratekit: redisstore.New: %w", err)
	}
	s := &Store{client: client, born: time.Now()}
	s.divert, s.keeps = redisopt.KeepDeadlines(client)
	s.proc, _ = client.(processor)
	s.cluster, _ = client.(*redis.ClusterClient)
	// a plain client talks to one server (or one Sentinel-watched master),
	// where a script may take keys of any slots; other clients shard by
	// hash tag, so only keys sharing one may share a script
	_, oneServer := client.(*redis.Client)
	if b := cfg.batching; b != nil || oneServer && !cfg.noBatching {
		p, ok := client.(pipeliner)
		if !ok {
			return nil, fmt.Errorf("ratekit: redisstore.New: WithBatching needs a client with a Pipeline method, not %T", client)
		}
		if b == nil {
			b = &Batching{MaxBatch: defaultMaxBatch, Parallel: defaultParallel}
		}
		s.batch = newBatcher(p, s.proc, b.MaxBatch, b.Parallel, b.MaxWait, oneServer, !s.keeps)
		s.quotas = newBatcher(p, s.proc, b.MaxBatch, b.Parallel, b.MaxWait, oneServer, !s.keeps)
		s.batch.divert, s.quotas.divert = s.divert, s.divert
	}
	return s, nil
}

// Traits reports whether the store keeps deadlines by itself. It does over
// a *redis.Client, *redis.ClusterClient or *redis.Ring with
// ContextTimeoutEnabled, which sets each connection's read and write
// deadlines from the context, and dials, waits for a pooled connection and
// backs off between retries within it; and over any *redis.Client whose
// timeouts set socket deadlines, through the clone New sends the store's
// calls through. It also does when it batches, whatever the client's
// options: a call waits for its pipeline with its context's timer (or, for
// a Limiter's own deadline, which cannot be cancelled, the batch keeps it:
// the pipeline ends by it, and a call still queued then is answered as not
// sent), and over a client that keeps no deadlines (a Cluster or Ring
// client without ContextTimeoutEnabled, a client whose ReadTimeout of -2
// sets no socket deadline) the pipelines go out from goroutines of the
// store's own rather than the caller's, so a stalled server holds no
// caller past its deadline (a call that would make one such goroutine per
// call, a reset or an override's write, makes it and waits for it until
// the deadline). See [core.WithTimeout].
//
// Over a *redis.ClusterClient it also states each key's shard: the
// address of the master that serves the key's slot in the client's slot
// map, so that a [core.Limiter] keeps a circuit breaker per master. Over a
// *redis.Ring the shard is the address of the server that the ring's
// consistent hash picks for the key's hash tag, among the servers its
// heartbeat sees up.
func (s *Store) Traits() core.Traits {
	t := core.Traits{KeepsDeadlines: s.keeps || s.batch != nil}
	if s.cluster != nil {
		t.Shard = s.shard
	}
	if r, ok := s.client.(*redis.Ring); ok {
		t.Shard = func(key string) string { return ringShard(r, key) }
	}
	return t
}

// bounded runs f, a call that does not go through the batcher, within
// ctx's deadline when the store promises to keep deadlines (it batches)
// and the client does not keep them: on a goroutine of its own, which the
// caller abandons when ctx ends and Close waits for. Otherwise f runs on
// the caller's goroutine. It serves the rare calls (resets and overrides'
// writes); decisions, peeks and refunds go through the batchers.
func (s *Store) bounded(ctx context.Context, f func(context.Context) error) error {
	if s.keeps || s.batch == nil {
		return f(s.divert.Mark(ctx))
	}
	done := make(chan error, 1)
	s.detached.Add(1)
	go func() {
		defer s.detached.Done()
		done <- f(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ringShard returns the address of the server of ring that serves key, or
// "" when the ring has none up. The ring picks it from its hash of the
// servers it last saw up, in memory, without I/O.
func ringShard(ring *redis.Ring, key string) string {
	c, err := ring.GetShardClientForKey(key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// shard returns the address of the master that serves key in the Cluster
// client's slot map, or "" before the client has one: asking for it then
// would load it, a wait on the network.
func (s *Store) shard(key string) string {
	if !s.routed.Load() {
		return ""
	}
	c, err := s.cluster.MasterForKey(context.Background(), key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// reloadEvery is the least time between two reloads of a Cluster client's
// slot map that failing calls ask for.
const reloadEvery = 100 * time.Millisecond

// reloadSlots asks a Cluster client to reload its slot map, at most once
// per reloadEvery, after a call failed with err for a reason of the
// network or the server, not of the call. go-redis reloads it by itself
// only on a MOVED, ASK or READONLY reply, or once the map is older than
// ClusterStateReloadInterval (a minute): the slots of a master that died
// would otherwise go on being sent to it for up to a minute after its
// replica took them over, since a dead master sends no MOVED.
func (s *Store) reloadSlots(err error) {
	if s.cluster == nil || rediserr.KeyError(err) || errors.Is(err, context.Canceled) || errors.Is(err, core.ErrClosed) {
		return
	}
	now := int64(time.Since(s.born))
	last := s.reloaded.Load()
	if last != 0 && now-last < int64(reloadEvery) || !s.reloaded.CompareAndSwap(last, now) {
		return
	}
	s.cluster.ReloadState(context.Background())
}

// Close fails a batching store's queued calls and waits for pipelines in
// flight; later calls fail with [core.ErrClosed]. It also closes the
// subscription of reset watchers ([Store.WatchResets]) and waits for
// its goroutine; their stop functions then do nothing. It never closes the
// client.
func (s *Store) Close() error {
	s.resets.close()
	if s.batch != nil {
		s.batch.close()
		s.quotas.close()
	}
	s.detached.Wait()
	return nil
}

// AllowAllN implements [core.Store.AllowAllN] in one script call.
func (s *Store) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	results := make([]core.Result, len(checks))
	if err := s.allow(ctx, checks, n, results); err != nil {
		return nil, err
	}
	return results, nil
}

// AllowInto is [Store.AllowAllN] deciding into results, one per check,
// rather than into a slice it allocates: a [core.Limiter] calls it so.
func (s *Store) AllowInto(ctx context.Context, checks []core.Check, n int, results []core.Result) error {
	if len(results) != len(checks) {
		return fmt.Errorf("%w: %d results for %d checks", core.ErrMalformedReply, len(results), len(checks))
	}
	return s.allow(ctx, checks, n, results)
}

// oneKeyArgs holds the EVALSHA arguments of a one-key call in one
// allocation: command, script, 1 (number of keys), key, cost. A cost of 1
// is not sent: the one-key scripts take an absent cost for 1.
type oneKeyArgs [5]any

// allow decides checks at cost n into results, in one script call.
func (s *Store) allow(ctx context.Context, checks []core.Check, n int, results []core.Result) error {
	if err := storecheck.Validate(checks, n); err != nil {
		return err
	}
	if storecheck.HasOverride(checks) {
		return s.allowOverride(ctx, checks, n, results)
	}
	var (
		sc     *script
		ireply int64  // reply of an intReply script
		sreply string // reply of any other
		err    error
	)
	if ls := s.scripts(checks[0].Limit); len(checks) == 1 && ls.single != nil {
		sc = ls.single
		ireply, sreply, err = s.runOne(ctx, sc, checks[0].Key, n)
	} else {
		sc = scriptFor(checks)
		ireply, sreply, err = s.runMany(ctx, s.batch, sc, checks, n)
	}
	return s.answer(sc, checks, n, results, ireply, sreply, err)
}

// answer decodes into results the reply of sc to a call of checks at cost
// n, or returns the call's error.
func (s *Store) answer(sc *script, checks []core.Check, n int, results []core.Result, ireply int64, sreply string, err error) error {
	if err != nil {
		s.reloadSlots(err)
		return fmt.Errorf("ratekit: redis: %w", err)
	}
	if s.cluster != nil && !s.routed.Load() {
		s.routed.Store(true)
	}
	if sc.intReply {
		if checks[0].Limit.Algorithm == core.FixedWindow {
			results[0], err = fixedResult(checks[0].Limit, n, ireply)
		} else {
			results[0], err = gcraResult(checks[0].Limit, n, ireply)
		}
		return err
	}
	return parseReply(sreply, checks, results)
}

// Begin begins the decision of check at cost n through the batcher, as
// [Store.AllowInto] makes it, and returns the call in flight, which
// [Store.Finish] waits for; nil when the call is not begun (the store does
// not batch, check has an override, or AllowInto would fail at once): a
// [core.Limiter] then calls AllowInto, which says why. A Limiter calls them
// for a request of one rule, so that its goroutine waits for Redis in a
// shallow stack (see [core.Store]).
func (s *Store) Begin(ctx context.Context, check core.Check, n int) any {
	if s.batch == nil || check.Override != "" {
		return nil
	}
	checks := [1]core.Check{check}
	if storecheck.Validate(checks[:], n) != nil {
		return nil
	}
	ls := s.scripts(check.Limit)
	if ls.single == nil {
		return nil
	}
	c := s.batch.call()
	c.oneKey(ls.single, check.Key, n)
	if !s.batch.begin(ctx, c) {
		return nil
	}
	return c
}

// Finish waits for the answer of a call that [Store.Begin] began, with the
// same ctx, check and n, and returns the result that AllowInto would have
// given. Every call begun must be finished, once.
func (s *Store) Finish(ctx context.Context, call any, check core.Check, n int) (core.Result, error) {
	c, ok := call.(*batchCall)
	if !ok || c.sc == nil {
		return core.Result{}, fmt.Errorf("ratekit: Finish of %T, not a call Begin began", call)
	}
	sc := c.sc
	ireply, sreply, err := s.batch.finish(ctx, c)
	var (
		checks  = [1]core.Check{check}
		results [1]core.Result
	)
	err = s.answer(sc, checks[:], n, results[:], ireply, sreply, err)
	return results[0], err
}

// runOne runs the one-key script sc on key at cost n: through the batcher,
// the client's Process method, or the generic script runner.
func (s *Store) runOne(ctx context.Context, sc *script, key string, n int) (int64, string, error) {
	switch {
	case s.batch != nil:
		c := s.batch.call()
		c.oneKey(sc, key, n)
		return s.batch.do(ctx, c)
	case s.proc != nil:
		args := &oneKeyArgs{nil, nil, 1, key, n}
		if n == 1 {
			return s.eval(ctx, sc, args[:4])
		}
		return s.eval(ctx, sc, args[:])
	case n == 1:
		return sc.split(sc.Run(ctx, s.client, []string{key}).Result())
	}
	return sc.split(sc.Run(ctx, s.client, []string{key}, n).Result())
}

// runMany runs the generic script sc on checks at cost n, each limit's
// arguments sent with its key, then extra, if any (a refund's bounds),
// through b: the store's batcher for decisions or for quota calls (nil
// when the store does not batch).
func (s *Store) runMany(ctx context.Context, b *batcher, sc *script, checks []core.Check, n int, extra ...any) (int64, string, error) {
	if s.proc == nil && b == nil {
		keys := make([]string, len(checks))
		args := make([]any, 1, 1+4*len(checks)+len(extra))
		args[0] = n
		for i := range checks {
			keys[i] = checks[i].Key
			args = append(args, s.scripts(checks[i].Limit).args[:]...)
		}
		args = append(args, extra...)
		return sc.split(sc.Run(ctx, s.client, keys, args...).Result())
	}
	args := s.manyArgs(checks, n, extra)
	if b == nil {
		return s.eval(ctx, sc, args)
	}
	c := b.call()
	c.manyKeys(sc, args, checks, n)
	return b.do(ctx, c)
}

// manyArgs returns the EVALSHA arguments of a generic script's call on
// checks at cost n, from the number of keys on (the first two are left for
// the command and the script): the keys, n, each limit's arguments, and
// extra.
func (s *Store) manyArgs(checks []core.Check, n int, extra []any) []any {
	args := make([]any, 3, 4+5*len(checks)+len(extra))
	args[2] = len(checks)
	for i := range checks {
		args = append(args, checks[i].Key)
	}
	args = append(args, n)
	for i := range checks {
		args = append(args, s.scripts(checks[i].Limit).args[:]...)
	}
	return append(args, extra...)
}

// eval runs sc by EVALSHA, and by EVAL when the server answers NOSCRIPT
// (after a restart or a failover), through the client's Process method.
// args holds the command's arguments from the number of keys on; eval fills
// args[0] and args[1]. It returns the reply as sc answers it: an integer
// or a string.
func (s *Store) eval(ctx context.Context, sc *script, args []any) (int64, string, error) {
	ctx = s.divert.Mark(ctx)
	args[0], args[1] = "evalsha", sc.sha
	for {
		cmd := newScriptCmd(ctx, sc, args)
		_ = s.proc.Process(ctx, cmd)
		ireply, sreply, err := scriptReply(cmd)
		if err == nil || args[0] == "eval" || !noScript(err) {
			return ireply, sreply, err
		}
		args[0], args[1] = "eval", sc.src
	}
}

// split sorts a reply read as any into the integer or string sc answers.
func (sc *script) split(reply any, err error) (int64, string, error) {
	if err != nil {
		return 0, "", err
	}
	switch r := reply.(type) {
	case int64:
		if sc.intReply {
			return r, "", nil
		}
	case string:
		if !sc.intReply {
			return 0, r, nil
		}
	}
	return 0, "", fmt.Errorf("%w: %T reply", core.ErrMalformedReply, reply)
}

// scripts returns the cached scripts and arguments of limit.
func (s *Store) scripts(limit core.Limit) *limitScripts {
	cur := s.compiled()
	if ls, ok := cur[limit]; ok {
		return ls
	}
	if len(cur) < maxCompiledLimits {
		if ls := s.compile(limit); ls != nil {
			return ls
		}
	}
	// too many distinct limits: generic scripts, nothing cached
	return &limitScripts{args: limitArgs(limit)}
}

// compile compiles limit's scripts into the cache and returns them, or
// nil when the cache is full.
func (s *Store) compile(limit core.Limit) *limitScripts {
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	cur := s.compiled()
	if ls, ok := cur[limit]; ok {
		return ls // compiled by another caller meanwhile
	}
	if len(cur) >= maxCompiledLimits {
		return nil
	}
	ls := &limitScripts{args: limitArgs(limit)}
	ls.single = newScript(singleSource(limit), singleIntReply(limit))
	ls.single.logUnits = limit.Algorithm == core.SlidingWindowLog
	if s.batch != nil {
		if src := manySource(limit); src != "" {
			ls.single.many = newScript(src, ls.single.intReply)
			ls.single.many.manyReply = true
		}
	}
	next := make(map[core.Limit]*limitScripts, len(cur)+1)
	maps.Copy(next, cur)
	next[limit] = ls
	s.limits.Store(&next)
	return ls
}

// compiled returns the limits whose scripts are compiled, and them; nil
// before the first.
func (s *Store) compiled() map[core.Limit]*limitScripts {
	if m := s.limits.Load(); m != nil {
		return *m
	}
	return nil
}

// limitArgs returns limit's arguments for the generic scripts, boxed.
func limitArgs(limit core.Limit) [4]any {
	return [4]any{
		strconv.Itoa(int(limit.Algorithm)),
		strconv.Itoa(limit.Rate),
		strconv.FormatInt(limit.Period.Milliseconds(), 10),
		strconv.Itoa(limit.Burst),
	}
}
