package inflight

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// orphan is a holder that may hold a slot in Redis that no Lease renews or
// will release: an acquisition whose outcome nobody knows (its reply came
// after the deadline, or never came), or a release that failed.
type orphan struct{ key, holder string }

// maxOrphans bounds the orphans a Limiter keeps: during an outage every
// acquisition may leave one, and each is forgotten within the lease time
// anyway, when its slot, if it has one, runs out by itself.
const maxOrphans = 1 << 16

// orphaned takes charge of the holder of key: the renewal goroutine
// releases it now, then again until Redis says it removed it or its lease
// would have run out (a release may reach Redis before a late acquisition
// does). After Close, it is released once, here.
func (l *Limiter) orphaned(ctx context.Context, key, holder string) {
	o := orphan{key, holder}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.releaseOrphan(context.WithoutCancel(ctx), o) // nothing will try again
		return
	}
	if len(l.orphans) < maxOrphans {
		l.orphans[o] = time.Now().Add(l.lease)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// orphanCount returns how many orphans l keeps.
func (l *Limiter) orphanCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.orphans)
}

// releaseOrphan releases o once.
func (l *Limiter) releaseOrphan(ctx context.Context, o orphan) {
	reply, err, _ := l.do(ctx, l.timeout, func(ctx context.Context) (any, error) {
		return releaseScript.Run(ctx, l.client, []string{o.key}, o.holder).Result()
	}, nil)
	l.settleOrphan(o, reply, err)
}

// settleOrphan forgets o once Redis says it removed it.
func (l *Limiter) settleOrphan(o orphan, reply any, err error) {
	if n, ok := reply.(int64); err == nil && ok && n == 1 {
		l.mu.Lock()
		delete(l.orphans, o)
		l.mu.Unlock()
	}
}

// releaseOrphans releases every orphan whose lease would still run,
// renewPipeline per pipeline, until a pipeline fails, and forgets the
// others.
func (l *Limiter) releaseOrphans(ctx context.Context, timeout time.Duration) {
	now := time.Now()
	var os []orphan
	l.mu.Lock()
	for o, until := range l.orphans {
		if now.After(until) {
			delete(l.orphans, o)
			continue
		}
		os = append(os, o)
	}
	l.mu.Unlock()
	p, pipelines := l.client.(pipeliner)
	for len(os) > 0 && ctx.Err() == nil {
		if !pipelines {
			l.releaseOrphan(ctx, os[0])
			os = os[1:]
			continue
		}
		batch := os[:min(len(os), renewPipeline)]
		os = os[len(batch):]
		reply, err, _ := l.do(ctx, timeout, func(ctx context.Context) (any, error) {
			return pipelineScript(ctx, p, releaseScript, len(batch), func(i int) (string, []any) {
				return batch[i].key, []any{batch[i].holder}
			}), nil
		}, nil)
		if err != nil {
			if ctx.Err() == nil {
				l.report(fmt.Errorf("ratekit: inflight: release %d slots of late acquisitions or failed releases: %w", len(batch), err))
			}
			return // Redis is failing: the others wait for the next try, not each for its deadline
		}
		for i, cmd := range reply.([]*redis.Cmd) {
			l.settleOrphan(batch[i], cmd.Val(), cmd.Err())
		}
	}
}

// pipelineScript calls script n times in a pipeline, the i-th call on
// the key and with the arguments that call(i) returns: by the script's
// SHA1, then, for the calls that found it missing from Redis's cache,
// with the script itself in a second pipeline. It returns the calls'
// commands, each with its reply or error.
func pipelineScript(ctx context.Context, p pipeliner, script *redis.Script, n int, call func(i int) (string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	pipe := p.Pipeline()
	for i := range cmds {
		key, args := call(i)
		cmds[i] = script.EvalSha(ctx, pipe, []string{key}, args...)
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
	var again redis.Pipeliner
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			if again == nil {
				again = p.Pipeline()
			}
			key, args := call(i)
			cmds[i] = script.Eval(ctx, again, []string{key}, args...)
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	return cmds
}
