package redisstore

import (
	"embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// algorithmFiles holds each algorithm's Lua file, which defines its
// <name>_check and <name>_commit functions, indexed by Algorithm.
var algorithmFiles = [...]string{"gcra", "fixed", "slidinglog", "slidingcounter"}

// scriptSource assembles a decide script for the given algorithms: their
// files, a line gathering their functions into the checks and commits tables
// that decide_call.lua indexes by algorithm number + 1, decide_call.lua, and
// decide.lua.
func scriptSource(algs ...core.Algorithm) string { return decideSource("decide.lua", algs) }

// manyDecideSource assembles the many variant of scriptSource's script:
// decide_many.lua instead of decide.lua, which decides several calls in one
// script call.
func manyDecideSource(algs ...core.Algorithm) string { return decideSource("decide_many.lua", algs) }

// decideSource assembles the algorithm files of algs, the line gathering
// their functions, decide_call.lua and entry.
func decideSource(entry string, algs []core.Algorithm) string {
	var b, checks, commits strings.Builder
	for _, a := range algs {
		name := algorithmFiles[a]
		b.WriteString(readScript(name + ".lua"))
		b.WriteByte('\n')
		fmt.Fprintf(&checks, "[%d] = %s_check, ", a+1, name)
		fmt.Fprintf(&commits, "[%d] = %s_commit, ", a+1, name)
	}
	fmt.Fprintf(&b, "local checks = {%s}\nlocal commits = {%s}\n", checks.String(), commits.String())
	b.WriteString(readScript("decide_call.lua"))
	b.WriteString(readScript(entry))
	return b.String()
}

// quotaSource assembles the script that reads checks without spending
// (peek.lua) or, when refund is set, gives units back first (refund.lua,
// then peek.lua), after the algorithm files of algs.
func quotaSource(refund bool, algs ...core.Algorithm) string {
	if refund {
		return beforePeekSource("refund", algs)
	}
	return beforePeekSource("", algs)
}

// chargeSource assembles the script that charges checks whatever they
// hold (charge.lua, then peek.lua), after the algorithm files of algs.
func chargeSource(algs ...core.Algorithm) string { return beforePeekSource("charge", algs) }

// beforePeekSource assembles peek.lua after the algorithm files of algs
// and, unless kind is "", the file kind.lua, whose function before runs
// first, with the algorithms' <name>_<kind> functions gathered into the
// table kind + "s" (refunds, charges).
func beforePeekSource(kind string, algs []core.Algorithm) string {
	var b, checks, befores strings.Builder
	if kind == "refund" {
		b.WriteString(readScript("refund_slack.lua"))
	}
	for _, a := range algs {
		name := algorithmFiles[a]
		b.WriteString(readScript(name + ".lua"))
		b.WriteByte('\n')
		fmt.Fprintf(&checks, "[%d] = %s_check, ", a+1, name)
		if kind != "" {
			fmt.Fprintf(&befores, "[%d] = %s_%s, ", a+1, name, kind)
		}
	}
	fmt.Fprintf(&b, "local checks = {%s}\n", checks.String())
	if kind != "" {
		fmt.Fprintf(&b, "local %ss = {%s}\n", kind, befores.String())
		b.WriteString(readScript(kind + ".lua"))
	} else {
		b.WriteString("local before\n")
	}
	b.WriteString(readScript("peek.lua"))
	return b.String()
}

// singleSource assembles the script that decides one key under limit, with
// the limit's parameters compiled in as constants. GCRA and the fixed window
// have one-key scripts of their own, written out in full, that answer one
// integer (see [singleIntReply]): gcra_single.lua and fixed_single.lua. The
// sliding window counter has one written out in full too,
// slidingcounter_single.lua, which answers the string parseReply reads. The
// others, and fixed windows whose replies would not fit one integer, are
// their algorithm file and single.lua, which answer that string too.
func singleSource(limit core.Limit) string {
	switch {
	case limit.Algorithm == core.GCRA:
		return gcraConstants(limit) + readScript("gcra_single.lua")
	case singleIntReply(limit):
		return fixedConstants(limit) + readScript("fixed_single.lua")
	case limit.Algorithm == core.SlidingWindowCounter:
		return limitConstants(limit) + readScript("slidingcounter_single.lua")
	}
	name := algorithmFiles[limit.Algorithm]
	return readScript(name+".lua") + "\n" +
		fmt.Sprintf("local check, commit, rate, period, burst = %s_check, %s_commit, %d, %d, %d\n",
			name, name, limit.Rate, limit.Period.Microseconds(), limit.Burst) +
		readScript("single.lua")
}

// singleIntReply reports whether limit's one-key script answers one
// integer: GCRA's always (see [gcraResult]), a fixed window's when its
// reply, up to (rate + 1) × period in ms, is exact in a Lua number (see
// [fixedResult]): every limit of up to 2^30 units per 2.3 hours, or of a
// thousand per year.
func singleIntReply(limit core.Limit) bool {
	switch limit.Algorithm {
	case core.GCRA:
		return true
	case core.FixedWindow:
		return float64(limit.Rate+1)*float64(limit.Period.Milliseconds()) < 1<<53
	}
	return false
}

// manySource assembles the script that decides several one-key calls under
// limit in one script call, for a batching store, or "" if limit's one-key
// script has none: gcra_many.lua for GCRA, fixed_many.lua for the fixed
// windows that fixed_single.lua decides, slidingcounter_many.lua for the
// sliding window counter, slidinglog_many.lua for the sliding log. Each
// answers an array of its one-key script's replies: integers for GCRA and
// the fixed window, strings for the others.
func manySource(limit core.Limit) string {
	switch {
	case limit.Algorithm == core.GCRA:
		return gcraConstants(limit) + readScript("gcra_many.lua")
	case singleIntReply(limit):
		return fixedConstants(limit) + readScript("fixed_many.lua")
	case limit.Algorithm == core.SlidingWindowCounter:
		return limitConstants(limit) + readScript("slidingcounter_many.lua")
	case limit.Algorithm == core.SlidingWindowLog:
		return limitConstants(limit) + readScript("slidinglog_many.lua")
	}
	return ""
}

// limitConstants is the line that binds a limit's rate, period in µs and
// burst for slidingcounter_single.lua, slidingcounter_many.lua and
// slidinglog_many.lua.
func limitConstants(limit core.Limit) string {
	return fmt.Sprintf("local rate, period, burst = %d, %d, %d\n", limit.Rate, limit.Period.Microseconds(), limit.Burst)
}

// fixedConstants is the line that binds a fixed window's rate and period
// in ms for fixed_single.lua and fixed_many.lua.
func fixedConstants(limit core.Limit) string {
	return fmt.Sprintf("local rate, period = %d, %d\n", limit.Rate, limit.Period.Milliseconds())
}

// gcraConstants is the line that binds a GCRA limit's parameters for
// gcra_single.lua and gcra_many.lua: the interval (ceil(period/rate) µs),
// the tolerance (burst * interval µs), the burst; the end of a value written
// under this interval, "\0<interval>", and minus its length; the format of a
// value, "<tat - interval>\0<interval>"; and the expiry in ms of a key one
// unit from full. The NUL is written as the escape \000, whose three digits
// no digit of the interval can extend.
func gcraConstants(limit core.Limit) string {
	interval := storecheck.Interval(limit)
	iv := strconv.FormatInt(interval, 10)
	return fmt.Sprintf("local interval, tolerance, burst, sfx, sfxat, vfmt, px1 = %d, %d, %d, '\\000%s', %d, '%%d\\000%s', '%d'\n",
		interval, interval*int64(limit.Burst), limit.Burst, iv, -1-len(iv), iv, (interval+999)/1000)
}

func readScript(name string) string {
	src, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("ratekit: embedded script missing: " + name)
	}
	return string(src)
}

// Scripts run by EVALSHA, falling back to EVAL on NOSCRIPT. A call whose
// checks share one algorithm runs that algorithm's script, which carries no
// other algorithm's code; mixed calls run mixedScript.
// The peek and refund scripts are chosen the same way.
// Each decide script's many variant decides several of its calls in one
// script call, for a batching store.
var (
	decideScripts = withMany(newScriptSet(scriptSource), newScriptSet(manyDecideSource))
	peekScripts   = newScriptSet(func(algs ...core.Algorithm) string { return quotaSource(false, algs...) })
	refundScripts = newScriptSet(func(algs ...core.Algorithm) string { return quotaSource(true, algs...) })
	chargeScripts = newScriptSet(chargeSource)
)

// withMany makes each script of many the many variant of set's script for
// the same algorithms, and returns set.
func withMany(set, many *scriptSet) *scriptSet {
	link := func(sc, m *script) {
		m.manyReply, m.multiKey = true, true
		sc.many = m
	}
	for a := range set.each {
		link(set.each[a], many.each[a])
	}
	link(set.mixed, many.mixed)
	return set
}

// scriptSet holds one kind of script for each algorithm, and one for
// mixed calls.
type scriptSet struct {
	each  [len(algorithmFiles)]*script
	mixed *script
}

func newScriptSet(source func(algs ...core.Algorithm) string) *scriptSet {
	set := &scriptSet{mixed: newScript(source(core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter), false)}
	for a := range set.each {
		set.each[a] = newScript(source(core.Algorithm(a)), false)
	}
	return set
}

// scriptFor returns the script that decides checks.
func scriptFor(checks []core.Check) *script { return decideScripts.of(checks) }

// of returns the set's script for checks.
func (set *scriptSet) of(checks []core.Check) *script {
	alg := checks[0].Limit.Algorithm
	for i := 1; i < len(checks); i++ {
		if checks[i].Limit.Algorithm != alg {
			return set.mixed
		}
	}
	return set.each[alg]
}
