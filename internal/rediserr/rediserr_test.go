package rediserr_test

import (
	"context"
	"errors"
	"fmt"
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
