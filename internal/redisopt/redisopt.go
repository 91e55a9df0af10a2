// Package redisopt reads what ratekit's Redis-backed packages need to know
// of a go-redis client's options, and keeps their calls' deadlines over a
// client that does not keep them itself (see Divert).
package redisopt

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// KeepsDeadlines reports whether client returns from each call by its
// context's deadline on its own: a go-redis Client, ClusterClient or Ring
// with ContextTimeoutEnabled whose read and write timeouts are not
// negative (a negative one sets no deadline on the socket at all). Any
// other client (a wrapper, a mock) is taken not to, so its callers keep
// the deadline themselves.
func KeepsDeadlines(client redis.Scripter) bool {
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && socketDeadlines(o.ReadTimeout, o.WriteTimeout)
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && socketDeadlines(o.ReadTimeout, o.WriteTimeout)
	case *redis.Ring:
		o := c.Options()
		return o.ContextTimeoutEnabled && socketDeadlines(o.ReadTimeout, o.WriteTimeout)
	}
	return false
}

// KeepDeadlines returns how calls through client can return by their
// context's deadline on the caller's goroutine: keeps is set when the
// client keeps deadlines itself (see KeepsDeadlines), or through d, the
// client's Divert (see DivertOf), with which the calls' contexts must then
// be marked. d is nil when the client needs none or a Divert cannot help;
// keeps is unset when no call through client keeps its deadline.
func KeepDeadlines(client redis.Scripter) (d *Divert, keeps bool) {
	if d = DivertOf(client); d != nil {
		return d, true
	}
	return nil, KeepsDeadlines(client)
}

// socketDeadlines reports whether a client of these (normalized) timeouts
// sets deadlines on its sockets: -1 (-2 as given) sets none.
func socketDeadlines(read, write time.Duration) bool { return read >= 0 && write >= 0 }

// Divert keeps the context's deadline for calls through a *redis.Client
// without ContextTimeoutEnabled, on the caller's goroutine. Such a client
// sets its sockets' deadlines from its own timeouts and ignores the
// context's; a caller that must return by the deadline could only leave
// the call on another goroutine, two goroutine hand-offs a call.
//
// A Divert adds a hook to the client, after the hooks it has. The hook
// passes every call on unchanged, except those whose context Divert has
// marked (see Mark, Marked): it sends these through a clone of the client
// (Client.WithTimeout) over the same connection pool, with the same
// options but ContextTimeoutEnabled. So a marked call runs the hooks the
// client had when the Divert was made, then keeps its deadline on the
// socket, as over a client with ContextTimeoutEnabled. Hooks added to the
// client after that do not run for marked calls, and a hook that calls on
// with a context not derived from the marked one unmarks the call. A
// client has one Divert at most, however many callers ask for it.
type Divert struct {
	clone *redis.Client
}

// divertKey is the context key of a marked call; its value is the Divert.
type divertKey struct{}

// diverts holds each client's Divert, for as long as the client lives.
var diverts sync.Map // weak.Pointer[redis.Client] → *Divert

// divertMu serializes the making of Diverts, so that a client gets one
// hook at most.
var divertMu sync.Mutex

// DivertOf returns the Divert of client when calls through it need one to
// keep their deadlines: a *redis.Client without ContextTimeoutEnabled
// whose read and write timeouts set socket deadlines (not negative). It
// returns nil for any other client: one that keeps deadlines itself, or
// one a Divert cannot help (a ClusterClient or Ring without
// ContextTimeoutEnabled, a client that sets no socket deadline, a wrapper).
func DivertOf(client redis.Scripter) *Divert {
	c, ok := client.(*redis.Client)
	if !ok {
		return nil
	}
	o := c.Options()
	if o.ContextTimeoutEnabled || !socketDeadlines(o.ReadTimeout, o.WriteTimeout) {
		return nil
	}
	key := weak.Make(c)
	if d, ok := diverts.Load(key); ok {
		return d.(*Divert)
	}
	divertMu.Lock()
	defer divertMu.Unlock()
	if d, ok := diverts.Load(key); ok {
		return d.(*Divert)
	}
	read, write := o.ReadTimeout, o.WriteTimeout
	clone := c.WithTimeout(read)
	// The clone's options are a copy of its own, unused until now, and
	// read on every call: a call through the clone keeps the context's
	// deadline on the socket.
	co := clone.Options()
	co.WriteTimeout = write
	co.ContextTimeoutEnabled = true
	d := &Divert{clone: clone}
	c.AddHook(divertHook{d})
	diverts.Store(key, d)
	runtime.AddCleanup(c, func(key weak.Pointer[redis.Client]) { diverts.Delete(key) }, key)
	return d
}

// Mark returns ctx marked for d: calls made with it keep its deadline.
// A nil Divert returns ctx as it is.
func (d *Divert) Mark(ctx context.Context) context.Context {
	if d == nil {
		return ctx
	}
	return context.WithValue(ctx, divertKey{}, d)
}

// Marked is a marked context that a caller can hold in a struct of its
// own, for marking without an allocation: see Set.
type Marked struct {
	context.Context
	d *Divert
}

// Set marks ctx for d in m and returns m as the context to call with. m
// must outlive the calls made with it.
func (m *Marked) Set(d *Divert, ctx context.Context) context.Context {
	m.Context, m.d = ctx, d
	return m
}

// Value returns m's Divert for the marking key, else what its context
// holds.
func (m *Marked) Value(key any) any {
	if _, ok := key.(divertKey); ok {
		return m.d
	}
	return m.Context.Value(key)
}

// divertHook sends marked calls through the Divert's clone.
type divertHook struct{ d *Divert }

func (h divertHook) marked(ctx context.Context) bool {
	if m, ok := ctx.(*Marked); ok {
		return m.d == h.d
	}
	d, _ := ctx.Value(divertKey{}).(*Divert)
	return d == h.d
}

func (h divertHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h divertHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.marked(ctx) {
			return h.d.clone.Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h divertHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// The same hook wraps transactions, whose commands come wrapped in
		// MULTI and EXEC: none is marked, and a marked one would go on
		// unchanged.
		if !h.marked(ctx) || len(cmds) > 0 && cmds[0].Name() == "multi" {
			return next(ctx, cmds)
		}
		p := h.d.clone.Pipeline()
		for _, cmd := range cmds {
			_ = p.Process(ctx, cmd)
		}
		_, err := p.Exec(ctx)
		return err
	}
}
