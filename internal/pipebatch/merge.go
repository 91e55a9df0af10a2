package pipebatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// maxMergedKeys bounds the keys of one merged script run, and so how long
// one run holds Redis: a pipeline whose calls name more goes as several
// runs.
const maxMergedKeys = 1024

// mergedSrc is the script that runs the calls of one pipeline that share a
// script (the %s) in one script run, in order, each as a function of its
// own keys and arguments, and replies with each call's reply (an array of
// integers) after its length.
//
// KEYS: every call's keys, in order.
// ARGV[1]: m, the calls; ARGV[2i], ARGV[2i+1]: call i's keys and
// arguments (how many); then every call's arguments, in order.
const mergedSrc = `local function call(KEYS, ARGV)
%s
end
local m = tonumber(ARGV[1])
local out, o, k, a = {}, 0, 0, 1 + 2 * m
for i = 1, m do
  local nk, na = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local r = call({(table.unpack or unpack)(KEYS, k + 1, k + nk)}, {(table.unpack or unpack)(ARGV, a + 1, a + na)})
  o = o + 1
  out[o] = #r
  for j = 1, #r do out[o + j] = r[j] end
  o, k, a = o + #r, k + nk, a + na
end
return out
`

// script is a script's merged form: its source and SHA1, and the SHA1 of
// the script it merges.
type script struct{ src, sha, of string }

// mergedScripts holds the merged form of each script merged so far (a
// program has a handful): src → *script.
var mergedScripts sync.Map

func mergedOf(src string) *script {
	if s, ok := mergedScripts.Load(src); ok {
		return s.(*script)
	}
	m := fmt.Sprintf(mergedSrc, src)
	s, _ := mergedScripts.LoadOrStore(src, &script{src: m, sha: redis.NewScript(m).Hash(), of: redis.NewScript(src).Hash()})
	return s.(*script)
}

// errMergedReply is the error of the calls of a merged run whose reply
// does not split into one reply per call.
var errMergedReply = errors.New("ratekit: pipebatch: merged script reply does not split into its calls")

// unit is one command of a pipeline: a call's script run, or the calls
// of one script merged into one run.
type unit struct {
	src   string // the script's source, for EVAL
	args  []any
	calls []*call
	nkeys []int // each merged call's keys
	keys  int   // keys of the merged calls
	cmd   *redis.IntSliceCmd
}

// numKeys returns how many keys the EVALSHA args names, false when it
// cannot tell.
func numKeys(args []any) (int, bool) {
	if len(args) < 3 {
		return 0, false
	}
	var n int
	switch v := args[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	case string:
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if n < 0 || 3+n > len(args) {
		return 0, false
	}
	return n, true
}

// units plans batch's commands: with merge, the calls of one script go
// as one run (up to maxMergedKeys keys each), at the place of their first
// call; every other call goes as itself.
func units(batch []*call, merge bool) []*unit {
	us := make([]*unit, 0, 1)
	open := make(map[string]*unit, 1) // script → its run taking calls
	for _, c := range batch {
		n, ok := numKeys(c.args)
		if !merge || !ok {
			us = append(us, &unit{src: c.src, args: c.args, calls: []*call{c}})
			continue
		}
		u := open[c.src]
		if u == nil || u.keys+n > maxMergedKeys {
			u = &unit{src: c.src, keys: n}
			open[c.src] = u
			us = append(us, u)
		} else {
			u.keys += n
		}
		u.calls = append(u.calls, c)
		u.nkeys = append(u.nkeys, n)
	}
	for _, u := range us {
		if u.args == nil {
			u.build()
		}
	}
	return us
}

// build makes u's command: the lone call's own, or the merged run's.
func (u *unit) build() {
	if len(u.calls) == 1 {
		u.args = u.calls[0].args
		return
	}
	m := mergedOf(u.src)
	u.src = m.src
	nargs := 0
	for _, c := range u.calls {
		nargs += len(c.args)
	}
	args := make([]any, 0, 4+nargs)
	args = append(args, "evalsha", m.sha, u.keys)
	for i, c := range u.calls {
		args = append(args, c.args[3:3+u.nkeys[i]]...)
	}
	args = append(args, len(u.calls))
	for i, c := range u.calls {
		args = append(args, u.nkeys[i], len(c.args)-3-u.nkeys[i])
	}
	for i, c := range u.calls {
		args = append(args, c.args[3+u.nkeys[i]:]...)
	}
	u.args = args
}

// answer gives each of u's calls its reply.
func (u *unit) answer() {
	reply, err := u.cmd.Result()
	if len(u.calls) == 1 {
		u.calls[0].reply, u.calls[0].err = reply, err
		return
	}
	if err == nil {
		err = split(reply, u.calls)
	}
	if err != nil {
		for _, c := range u.calls {
			c.reply, c.err = nil, err
		}
	}
}

// split hands each call its part of a merged run's reply.
func split(reply []int64, calls []*call) error {
	at := 0
	for _, c := range calls {
		if at >= len(reply) {
			return errMergedReply
		}
		n := reply[at]
		at++
		if n < 0 || n > int64(len(reply)-at) {
			return errMergedReply
		}
		end := at + int(n)
		c.reply = reply[at:end:end]
		at = end
	}
	if at != len(reply) {
		return errMergedReply
	}
	return nil
}

// sendUnits sends us, one command alone or all in one pipeline, and those
// Redis does not know yet by EVAL in a second, then answers their calls.
func (b *Batcher) sendUnits(ctx context.Context, us []*unit) {
	for _, u := range us {
		u.cmd = newCmd(ctx, u.args)
	}
	b.exec(ctx, us)
	var again []*unit
	for _, u := range us {
		if err := u.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			u.cmd = newCmd(ctx, evalArgs(u.src, u.args))
			again = append(again, u)
		}
	}
	if len(again) > 0 {
		b.exec(ctx, again)
	}
	for _, u := range us {
		u.answer()
	}
}

// exec sends the commands of us, alone or in one pipeline.
func (b *Batcher) exec(ctx context.Context, us []*unit) {
	if len(us) == 1 {
		_ = b.client.Process(ctx, us[0].cmd)
		return
	}
	pipe := b.client.Pipeline()
	for _, u := range us {
		_ = pipe.Process(ctx, u.cmd)
	}
	_, _ = pipe.Exec(ctx)
}

// MergedCalls returns how many calls of the script whose source is src a
// command runs: 1 for the script's own EVALSHA or EVAL, as many as it
// merged for its merged run's, 0 for any other command. A hook that
// counts a script's calls uses it.
func MergedCalls(cmd redis.Cmder, src string) int {
	a := cmd.Args()
	if len(a) < 3 || cmd.Name() != "evalsha" && cmd.Name() != "eval" {
		return 0
	}
	m := mergedOf(src)
	switch a[1] {
	case src, m.of:
		return 1
	case m.src, m.sha:
	default:
		return 0
	}
	n, ok := numKeys(a)
	if !ok || len(a) < 4+n {
		return 0
	}
	calls, _ := a[3+n].(int)
	return calls
}
