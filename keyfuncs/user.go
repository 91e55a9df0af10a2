package keyfuncs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/ratekit/ratekit/core"
)

var (
	errNoContextUser = fmt.Errorf("keyfuncs: no user in request context: %w", core.ErrNoIdentity)
	errNilFunc       = errors.New("keyfuncs: nil function")
)

// ContextUser returns a key function whose identity is the user that the
// application's own authentication middleware has already put in the
// request context: "user:<id>", the same identity [JWT] gives the same user.
// fn reads the user from the context and reports false, or returns "", when
// there is none, which yields an error wrapping [core.ErrNoIdentity].
//
// The authentication middleware must run before the rate limiter and must
// have verified the user: whatever fn returns is trusted.
func ContextUser(fn func(context.Context) (string, bool)) core.KeyFunc {
	if fn == nil {
		return func(core.Request) (string, error) { return "", errNilFunc }
	}
	return func(r core.Request) (string, error) {
		id, ok := fn(r.Context())
		if !ok || id == "" {
			return "", errNoContextUser
		}
		return "user:" + id, nil
	}
}

// ContextUserValue is [ContextUser] for a user stored with
// context.WithValue(ctx, key, id), where id is a string, an integer, or a
// [fmt.Stringer] such as a UUID type. Any other value, or none, yields an
// error wrapping [core.ErrNoIdentity], as does a nil pointer.
func ContextUserValue(key any) core.KeyFunc {
	return ContextUser(func(ctx context.Context) (string, bool) {
		switch v := ctx.Value(key).(type) {
		case string:
			return v, true
		case int:
			return strconv.FormatInt(int64(v), 10), true
		case int64:
			return strconv.FormatInt(v, 10), true
		case int32:
			return strconv.FormatInt(int64(v), 10), true
		case uint:
			return strconv.FormatUint(uint64(v), 10), true
		case uint64:
			return strconv.FormatUint(v, 10), true
		case uint32:
			return strconv.FormatUint(uint64(v), 10), true
		case fmt.Stringer:
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
				return "", false // a typed nil pointer's String method may panic
			}
			return v.String(), true
		}
		return "", false
	})
}
