package core

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
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

// serverErrors are the prefixes of Redis error replies that tell of the
// server's state, not of one call: each is an outage of the store for as
// long as it lasts.
var serverErrors = []string{
	"OOM", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"BUSY", "NOREPLICAS", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM",
	"MOVED", "ASK", "NOSCRIPT",
}

// keyError reports whether err is an error reply of Redis about the call
// itself rather than the server (see [ErrKeyRejected]).
func keyError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range serverErrors {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// outOfMemory reports whether err is Redis refusing a write for want of
// memory: maxmemory reached under the noeviction policy.
func outOfMemory(err error) bool { return redis.HasErrorPrefix(err, "OOM") }

// oomHint is what the log says of an out-of-memory error, in words an
// operator can act on.
const oomHint = "Redis is out of memory (maxmemory reached with the noeviction policy) and refuses every write: " +
	"raise maxmemory, or use volatile-lru or volatile-ttl, which evict only keys with a TTL (every ratekit key has one); " +
	"until then the failure policy decides"
