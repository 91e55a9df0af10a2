package redisstore

import (
	"errors"
	"fmt"

	"github.com/ratekit/ratekit/internal/rediserr"
)

// ErrNoPermission is wrapped, with Redis's own error, by the errors of a
// [Store] whose Redis user lacks a permission that a call needs, such as
// an ACL user without the channel [ResetChannel] (Redis 7 grants a new
// user no channels unless acl-pubsub-default says allchannels): a
// [Store.Reset], [Store.SetOverride] or [Store.ClearOverride] that could
// not publish, whose write still applied, or a subscription to resets that
// Redis refused. The error's text names the permission and the ACL rule
// that grants it.
var ErrNoPermission = errors.New("ratekit: the Redis user lacks a permission")

// noPermission reports whether err is Redis refusing a command for want
// of an ACL permission: NOPERM, or the error a script gets for a PUBLISH
// to a channel its user may not use.
func noPermission(err error) bool { return rediserr.NoPermission(err) }

// publishErr wraps err, of a call that writes and then publishes on
// ResetChannel, with ErrNoPermission when the user may not publish there:
// the write applied, the other processes were not told.
func publishErr(err error) error {
	if !noPermission(err) {
		return err
	}
	return fmt.Errorf("%w to PUBLISH on channel %q, so other processes were not told, though the change applied in Redis (grant it: ACL SETUSER <user> &%s): %w",
		ErrNoPermission, ResetChannel, ResetChannel, err)
}

// subscribeErr wraps err, of a SUBSCRIBE to ResetChannel, with
// ErrNoPermission when the user may not subscribe there.
func subscribeErr(err error) error {
	if !noPermission(err) {
		return err
	}
	return fmt.Errorf("%w to SUBSCRIBE to channel %q, so resets made through other processes do not reach this one (grant it: ACL SETUSER <user> &%s): %w",
		ErrNoPermission, ResetChannel, ResetChannel, err)
}
