// Package rediserr classifies the errors of Redis calls for ratekit's
// limiters: whether an error reply is about the call itself (its keys, its
// script) or about the server, which packages core and inflight treat
// alike.
package rediserr

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// serverErrors are the prefixes of Redis error replies that tell of the
// server's state, not of one call: each is an outage of the store for as
// long as it lasts.
var serverErrors = []string{
	"OOM", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"BUSY", "NOREPLICAS", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM",
	"MOVED", "ASK", "NOSCRIPT",
}

// KeyError reports whether err is an error reply of Redis about the call
// itself, such as WRONGTYPE or a script error, rather than about the
// server. A network error, a timeout or a server error reply (OOM,
// LOADING, READONLY, CLUSTERDOWN, ...) is not one.
func KeyError(err error) bool {
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

// Timeout reports whether err is a deadline's: a context's
// (context.DeadlineExceeded) or a socket's (os.ErrDeadlineExceeded, which
// go-redis returns when a context's deadline, set on its connection,
// passes during a read or a write).
func Timeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// NoPermission reports whether err is Redis refusing a command for want of
// an ACL permission: NOPERM, or the error a script gets for a PUBLISH to a
// channel its user may not use, which Redis words "can't publish to the
// channel" and Valkey "No permissions to access a channel".
func NoPermission(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return redis.HasErrorPrefix(err, "NOPERM") || strings.Contains(msg, "can't publish to the channel") ||
		strings.Contains(msg, "No permissions to access a channel")
}
