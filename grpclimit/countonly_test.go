package grpclimit_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// A rule that counts only codes.Unauthenticated spends nothing for calls
// that succeed, denies once the failures spent it, and gives concurrent
// failures exactly its limit.
func TestCountOnly(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := adaptertest.FixedRule("login", 3)
	unauth := grpclimit.WithCountOnly("login", func(c codes.Code) bool { return c == codes.Unauthenticated })
	conn, _ := serve(t, interceptors(t, l, []core.Rule{rule}, unauth)...)
	for i := range 5 {
		if _, _, err := say(t, conn, "hi", adaptertest.ClientHeader, "a"); err != nil {
			t.Fatalf("call %d that succeeds: %v", i+1, err)
		}
	}
	var got []codes.Code
	for range 4 {
		_, _, err := say(t, conn, wrongPassword, adaptertest.ClientHeader, "a")
		got = append(got, status.Code(err))
	}
	if want := fmt.Sprint([]codes.Code{codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated, codes.ResourceExhausted}); fmt.Sprint(got) != want {
		t.Errorf("failed calls: %v, want %s", got, want)
	}
	if _, _, err := say(t, conn, "hi", adaptertest.ClientHeader, "a"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call that would succeed, once failures spent the rule: %v, want ResourceExhausted", err)
	}

	counts := adaptertest.CountConcurrent(20, func() int {
		_, _, err := say(t, conn, wrongPassword, adaptertest.ClientHeader, "b")
		return int(status.Code(err))
	})
	if counts[int(codes.Unauthenticated)] != 3 || counts[int(codes.ResourceExhausted)] != 17 {
		t.Errorf("20 concurrent failures: %v, want 3 Unauthenticated and 17 ResourceExhausted", counts)
	}
	if _, err := grpclimit.UnaryServerInterceptor(l, []core.Rule{rule}, grpclimit.WithCountOnly("login", nil)); err == nil {
		t.Error("WithCountOnly took a nil predicate")
	}
}
