package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/serverproc"
	"github.com/ratekit/ratekit/outbound"
)

// pathTimeout is the deadline of the outbound Limiter's and the server's
// Redis calls: long, so that on a loaded machine every decision is still
// Redis's (a call past it would be decided without Redis, which costs
// Redis nothing).
const pathTimeout = time.Second

// serverConns is how many gRPC connections the load opens to the server,
// its goroutines spread over them.
const serverConns = 8

// errDegraded is a turn the outbound Limiter handed out without Redis.
var errDegraded = errors.New("outbound: turn decided without Redis (degraded)")

// openReservations returns an outbound Limiter of n per minute (as many at
// once) over client, and its deciders: one Reserve a decision, allowed
// when the turn is now. At the benchmark's rate no turn has to wait.
func openReservations(ctx context.Context, client *redis.Client, n int) (*outbound.Limiter, func() decider, error) {
	lim, err := outbound.New(client, "api", outbound.PerMinute(n).WithBurst(n),
		outbound.WithPrefix("cap-outbound:"), outbound.WithTimeout(pathTimeout))
	if err != nil {
		return nil, nil, err
	}
	return lim, func() decider {
		return func(identity string) (bool, error) {
			r, err := lim.Reserve(ctx, identity)
			switch {
			case err != nil:
				return false, err
			case r.Degraded():
				return false, errDegraded
			}
			return r.Delay() == 0, nil
		}
	}, nil
}

// serverPath is the ratekit-server the server rows call: started at the
// first of them, for the whole run, and stopped by close.
type serverPath struct {
	bin     string // -ratekit-server, or built at the first use
	built   bool
	proc    *serverproc.Proc
	clients *serverproc.Clients
	mu      sync.Mutex
	next    int
}

// deciders returns deciders that call the server on client's Redis under
// a limit of n per minute, starting it on the first call.
func (sp *serverPath) deciders(ctx context.Context, client *redis.Client, n int) (func() decider, error) {
	if sp.proc == nil {
		if sp.bin == "" {
			bin, err := serverproc.Build(ctx)
			if err != nil {
				return nil, err
			}
			sp.bin, sp.built = bin, true
		}
		p, err := serverproc.Start(serverproc.Options{
			Bin: sp.bin, Redis: client.Options().Addr, PerMinute: n, Prefix: "cap-server:", Timeout: pathTimeout,
		})
		if err != nil {
			return nil, err
		}
		sp.proc = p
		progress("ratekit-server pid %d, gRPC on %s", p.Pid(), p.GRPC)
		if sp.clients, err = serverproc.Dial(p.GRPC, serverConns); err != nil {
			return nil, err
		}
	}
	return func() decider {
		sp.mu.Lock()
		c := sp.clients.Caller(sp.next)
		sp.next++
		sp.mu.Unlock()
		return func(value string) (bool, error) { return c.ShouldRateLimit(ctx, value) }
	}, nil
}

// close stops the server, if one started, and removes a binary it built.
func (sp *serverPath) close() error {
	var errs []error
	if sp.clients != nil {
		errs = append(errs, sp.clients.Close())
	}
	if sp.proc != nil {
		if err := sp.proc.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping ratekit-server: %w", err))
		}
	}
	if sp.built {
		serverproc.Cleanup()
	}
	return errors.Join(errs...)
}
