package pipebatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
)

// multiSrc adds ARGV[i] to KEYS[i] for each key, and replies how many keys
// and arguments it was given and each key's count after it.
const multiSrc = `local r = {#KEYS, #ARGV}
for i = 1, #KEYS do r[#r + 1] = redis.call('INCRBY', KEYS[i], ARGV[i]) end
return r -- a comment on the last line, without a newline after it`

var multiSHA = redis.NewScript(multiSrc).Hash()

// multiArgs is call i of multiSrc: 1 to 3 keys, the first shared by every
// call and each added to by 1, the others the call's own, added to by
// their place; and one more argument every other call.
func multiArgs(i int) []any {
	nk := 1 + i%3
	args := []any{"evalsha", multiSHA, nk, "shared"}
	for j := 1; j < nk; j++ {
		args = append(args, fmt.Sprintf("own%d-%d", i, j))
	}
	args = append(args, 1)
	for j := 1; j < nk; j++ {
		args = append(args, j+1)
	}
	if i%2 == 1 {
		args = append(args, "extra")
	}
	return args
}

// setupMerging is setup, but the Batcher merges calls of one script.
func setupMerging(t *testing.T) (*Batcher, *redis.Client, *gate) {
	t.Helper()
	b, client, g := setup(t)
	b.merge = true
	return b, client, g
}

// Over one server, the calls of one script that queue behind a held call
// go as one script run, in the order the pipeline would run them, each on
// its own keys and arguments and answered with its own reply; the calls of
// another script as a second run in the same pipeline; both again by EVAL,
// which loads them, when Redis does not know them.
func TestMergedRuns(t *testing.T) {
	b, client, g := setupMerging(t)
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	const nmulti, necho = 12, 5
	multi := make([]chan result, nmulti)
	echo := make([]chan result, necho)
	for i := range nmulti + necho {
		done := make(chan result, 1)
		args, src := multiArgs(i), multiSrc
		if i >= nmulti {
			args, src = echoArgs("e", i), echoSrc
			echo[i-nmulti] = done
		} else {
			multi[i] = done
		}
		go func() {
			r, err := b.Do(context.Background(), src, args)
			done <- result{r, err}
		}()
		queued(t, b, i+1)
	}
	close(g.open)
	if a := <-first; a.err != nil {
		t.Fatalf("the first call: %v", a.err)
	}
	for i := range nmulti {
		a := <-multi[i]
		nk := 1 + i%3
		// in the queue's order, but that its first call leads the
		// pipeline and comes last in it
		shared := int64(i)
		if i == 0 {
			shared = nmulti
		}
		want := []int64{int64(nk), int64(nk + i%2), shared}
		for j := 2; j <= nk; j++ {
			want = append(want, int64(j))
		}
		if a.err != nil || fmt.Sprint(a.reply) != fmt.Sprint(want) {
			t.Errorf("multi call %d: %v, %v; want %v", i, a.reply, a.err, want)
		}
	}
	for i := range necho {
		a := <-echo[i]
		if want := []int64{int64(nmulti + i), int64(i + 1)}; a.err != nil || fmt.Sprint(a.reply) != fmt.Sprint(want) {
			t.Errorf("echo call %d: %v, %v; want %v", i, a.reply, a.err, want)
		}
	}
	if n, err := client.Get(context.Background(), "shared").Int(); err != nil || n != nmulti {
		t.Errorf("shared holds %d (%v), want %d", n, err, nmulti)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// the two runs by EVALSHA, then again by EVAL
	if fmt.Sprint(g.pipelines) != "[2 2]" {
		t.Errorf("pipelines of %v commands, want [2 2]", g.pipelines)
	}
}

// A merged run that Redis fails fails each of its calls with Redis's
// error: here the script's error on one call's key (a hash, where it
// counts), after the call before it ran.
func TestMergedRunError(t *testing.T) {
	b, client, g := setupMerging(t)
	ctx := context.Background()
	first := hold(b, "first")
	for !g.held.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := client.HSet(ctx, "hash", "f", 1).Err(); err != nil {
		t.Fatal(err)
	}
	// the first queued call leads, and comes last in the run
	keys := []string{"lead", "good", "hash", "later"}
	answers := make([]chan result, len(keys))
	for i, k := range keys {
		answers[i] = make(chan result, 1)
		go func() {
			r, err := b.Do(ctx, echoSrc, echoArgs(k, i))
			answers[i] <- result{r, err}
		}()
		queued(t, b, i+1)
	}
	close(g.open)
	<-first
	for i, k := range keys {
		a := <-answers[i]
		var rerr redis.Error
		if !errors.As(a.err, &rerr) || !redis.HasErrorPrefix(a.err, "WRONGTYPE") {
			t.Errorf("call on %s: %v, %v; want Redis's WRONGTYPE", k, a.reply, a.err)
		}
	}
	// the run stopped at the error: the call before it counted, the one
	// after did not run
	if n, _ := client.Get(ctx, "good").Int(); n != 1 {
		t.Errorf("good holds %d, want 1", n)
	}
	if n, _ := client.Exists(ctx, "later", "lead").Result(); n != 0 {
		t.Errorf("%d of the calls after it ran", n)
	}
}

// units merges the calls of one script up to maxMergedKeys keys a run, at
// the place of the script's first call; a call whose keys it cannot count
// goes as itself, and so does every call when it does not merge.
func TestUnits(t *testing.T) {
	mk := func(src string, nkeys any, n int) *call {
		args := []any{"evalsha", "sha", nkeys}
		for i := range n {
			args = append(args, fmt.Sprint("k", i))
		}
		return &call{src: src, args: append(args, "arg")}
	}
	plan := func(batch []*call, merge bool) string {
		var s []string
		for _, u := range units(batch, merge) {
			s = append(s, fmt.Sprintf("%s:%d", u.calls[0].src, len(u.calls)))
		}
		return fmt.Sprint(s)
	}
	for _, tc := range []struct {
		name  string
		batch []*call
		merge bool
		want  string
	}{
		{"one script", []*call{mk("a", 1, 1), mk("a", 2, 2), mk("a", "1", 1)}, true, "[a:3]"},
		{"two scripts", []*call{mk("a", 1, 1), mk("b", 1, 1), mk("a", 1, 1)}, true, "[a:2 b:1]"},
		{"no merging", []*call{mk("a", 1, 1), mk("a", 1, 1)}, false, "[a:1 a:1]"},
		{"keys beyond the run's", []*call{mk("a", 600, 600), mk("a", 424, 424), mk("a", 1, 1), mk("a", 1, 1)}, true, "[a:2 a:2]"},
		{"uncounted keys", []*call{mk("a", 1, 1), mk("a", 5, 1), mk("a", 1.5, 1), mk("a", 1, 1)}, true, "[a:2 a:1 a:1]"},
	} {
		if got := plan(tc.batch, tc.merge); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A merged run's reply that does not split into one reply per call fails
// each call.
func TestSplitMalformed(t *testing.T) {
	for _, reply := range [][]int64{
		{}, {1, 7}, {1, 7, 3, 1, 2}, {1, 7, 1, 8, 9}, {-1, 1, 7},
	} {
		u := &unit{calls: []*call{{}, {}}, cmd: redis.NewIntSliceCmd(context.Background())}
		u.cmd.SetVal(reply)
		u.answer()
		for i, c := range u.calls {
			if !errors.Is(c.err, errMergedReply) || c.reply != nil {
				t.Errorf("reply %v, call %d: %v, %v; want errMergedReply", reply, i, c.reply, c.err)
			}
		}
	}
	u := &unit{calls: []*call{{}, {}}, cmd: redis.NewIntSliceCmd(context.Background())}
	u.cmd.SetVal([]int64{0, 2, 7, 8})
	u.answer()
	if a, b := u.calls[0], u.calls[1]; a.err != nil || len(a.reply) != 0 || b.err != nil || fmt.Sprint(b.reply) != "[7 8]" {
		t.Errorf("replies %v, %v and %v, %v; want [] and [7 8]", a.reply, a.err, b.reply, b.err)
	}
}

// MergedCalls counts the calls of a script a command runs.
func TestMergedCalls(t *testing.T) {
	ctx := context.Background()
	m := mergedOf(echoSrc)
	for _, tc := range []struct {
		args []any
		want int
	}{
		{echoArgs("k", 1), 1},
		{evalArgs(echoSrc, echoArgs("k", 1)), 1},
		{[]any{"evalsha", m.sha, 2, "a", "b", 2, 1, 1, 1, 1, 5, 6}, 2},
		{[]any{"eval", m.src, 1, "a", 1, 1, 1, 5}, 1},
		{[]any{"evalsha", holdSHA, 1, "k"}, 0},
		{[]any{"get", "k"}, 0},
	} {
		if got := MergedCalls(redis.NewCmd(ctx, tc.args...), echoSrc); got != tc.want {
			t.Errorf("%v: %d calls, want %d", tc.args[:3], got, tc.want)
		}
	}
}

// Calls of one script merged in runs, from many goroutines over two
// slots, against the same calls each run alone: Redis counts each once,
// and each call reads its own reply.
func TestConcurrentMergedCalls(t *testing.T) {
	client := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	b := New(client, 2)
	if !b.merge {
		t.Fatal("a Batcher over a *redis.Client does not merge")
	}
	concurrentCalls(t, b, client)
}

// FuzzSplit: whatever a merged run replies, split never panics, and when
// it accepts a reply, the calls' replies, each after its length, are that
// reply again.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{2, 7, 8, 0}, uint8(2))
	f.Add([]byte{1, 7}, uint8(2))
	f.Add([]byte{}, uint8(1))
	f.Add([]byte{0, 0, 0}, uint8(3))
	f.Add([]byte{255, 1}, uint8(1))
	f.Add([]byte{0, 0, 48}, uint8(1)) // a reply longer than its calls' replies

	f.Fuzz(func(t *testing.T, data []byte, ncalls uint8) {
		reply := make([]int64, len(data))
		for i, b := range data {
			reply[i] = int64(int8(b)) // lengths below 0 too
		}
		calls := make([]*call, int(ncalls%8)+1)
		for i := range calls {
			calls[i] = &call{}
		}
		if err := split(reply, calls); err != nil {
			if !errors.Is(err, errMergedReply) {
				t.Fatalf("split: %v", err)
			}
			return
		}
		var again []int64
		for _, c := range calls {
			again = append(append(again, int64(len(c.reply))), c.reply...)
		}
		if fmt.Sprint(again) != fmt.Sprint(reply) {
			t.Fatalf("split %v into calls that make %v", reply, again)
		}
	})
}
