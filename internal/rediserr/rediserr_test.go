package rediserr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/rediserr"
)

// replyError is an error reply of Redis, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestKeyError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{replyError("ERR user_script:3: bad argument"), true},
		{fmt.Errorf("check: %w", replyError("WRONGTYPE x")), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'"), false},
		{replyError("LOADING Redis is loading the dataset in memory"), false},
		{replyError("READONLY You can't write against a read only replica"), false},
		{replyError("CLUSTERDOWN The cluster is down"), false},
		{replyError("MOVED 3999 127.0.0.1:6381"), false},
		{replyError("NOSCRIPT No matching script"), false},
		{context.DeadlineExceeded, false},
		{errors.New("dial tcp: connection refused"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := rediserr.KeyError(tt.err); got != tt.want {
			t.Errorf("KeyError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// Timeout tells a deadline's error, a context's or a connection's, from
// any other.
func TestTimeout(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("ratekit: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{context.Canceled, false},
		{io.EOF, false},
		{replyError("BUSY Redis is busy running a script"), false},
		{nil, false},
	} {
		if got := rediserr.Timeout(tc.err); got != tc.want {
			t.Errorf("Timeout(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// NoPermission knows the refusals of an ACL as Redis and Valkey word them,
// a script's PUBLISH included, and nothing else.
func TestNoPermission(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{replyError("NOPERM User rk has no permissions to access the 'ratekit:resets' channel"), true},
		{replyError("ERR Error running script (call to f_72ac): @user_script:178: @user_script: 178: The user executing the script can't publish to the channel mentioned in the command"), true},
		{replyError("ERR ACL failure in script: No permissions to access a channel script: 72ac1d01557252ca5a534651d227361cee8c98cd, on @user_script:178."), true},
		{fmt.Errorf("pause: %w", replyError("NOPERM x")), true},
		{replyError("ERR user_script:3: bad argument"), false},
		{replyError("WRONGPASS invalid username-password pair"), false},
		{nil, false},
	} {
		if got := rediserr.NoPermission(tc.err); got != tc.want {
			t.Errorf("NoPermission(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
