package core

import (
	"errors"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/rediserr"
)

// ErrKeyRejected is wrapped by the error of a decision that Redis refused
// for reasons of the call itself (its keys or its script), not of the
// server: an error reply such as WRONGTYPE or a script error. Such an error
// is not an outage: it never counts toward the circuit breaker and is not
// answered by the failure policy, since every other key is still decided
// by Redis; [Limiter.Check] returns it, and adapters answer 500.
//
// ratekit's own scripts never raise it for a key written under another
// algorithm (a rule whose algorithm changed while its keys lived): they
// take such a key for absent and start it afresh.
var ErrKeyRejected = errors.New("ratekit: redis rejected the call's keys")

// keyError reports whether err is an error reply of Redis about the call
// itself rather than the server (see [ErrKeyRejected]).
func keyError(err error) bool { return rediserr.KeyError(err) }

// outOfMemory reports whether err is Redis refusing a write for want of
// memory: maxmemory reached under the noeviction policy.
func outOfMemory(err error) bool { return redis.HasErrorPrefix(err, "OOM") }

// oomHint is what the log says of an out-of-memory error, in words an
// operator can act on.
const oomHint = "Redis is out of memory (maxmemory reached with the noeviction policy) and refuses every write: " +
	"raise maxmemory, or use volatile-lru or volatile-ttl, which evict only keys with a TTL (every ratekit key has one); " +
	"until then the failure policy decides"

// mayHaveSpent reports whether a store call that failed with err may still
// have spent its units: it may have reached the store and run there, its
// answer lost or late (a timeout, a connection cut, a reply that could not
// be read). A call that Redis refused with an error reply (the script does
// not run: NOSCRIPT, BUSY, OOM, LOADING, ...), that found the server
// refusing connections, whose client or store was closed, or that the
// store never sent ([ErrNotSent]), spent nothing.
func mayHaveSpent(err error) bool {
	var reply redis.Error
	return !errors.As(err, &reply) && !errors.Is(err, syscall.ECONNREFUSED) &&
		!errors.Is(err, redis.ErrClosed) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotSent)
}
