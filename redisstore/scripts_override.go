package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// overrideSource turns a decide, peek or refund script assembled by
// scriptSource or quotaSource into its variant for checks that may have an
// override: scripts/override.lua goes after the algorithm files, and the
// rest, from the line that gathers the algorithms' functions on, becomes
// the function run, whose reply the script answers with override.lua's
// tail after it.
func overrideSource(src string) string {
	i := strings.Index(src, "local checks = {")
	if i < 0 {
		panic("ratekit: script without its checks table")
	}
	return src[:i] + readScript("override.lua") + "\nlocal function run()\n" + src[i:] +
		"\nend\nreturn run() .. tail\n"
}

// The variants of decideScripts, peekScripts and refundScripts for calls
// with a check that names an override key.
var (
	overrideDecideScripts = newScriptSet(func(algs ...core.Algorithm) string { return overrideSource(scriptSource(algs...)) })
	overridePeekScripts   = newScriptSet(func(algs ...core.Algorithm) string { return overrideSource(quotaSource(false, algs...)) })
	overrideRefundScripts = newScriptSet(func(algs ...core.Algorithm) string { return overrideSource(quotaSource(true, algs...)) })
	overrideChargeScripts = newScriptSet(func(algs ...core.Algorithm) string { return overrideSource(chargeSource(algs...)) })
)

// overrideSets maps each script set to its override variant.
var overrideSets = map[*scriptSet]*scriptSet{
	decideScripts: overrideDecideScripts,
	peekScripts:   overridePeekScripts,
	refundScripts: overrideRefundScripts,
	chargeScripts: overrideChargeScripts,
}

// parseOverrideReply decodes the reply of an override script (see
// scripts/override.lua): the entry script's reply, read by parseReply
// under the limits applied, then ';' and three integers per check, the
// override applied (rate, period in ms, burst) or 0 0 0. Each result's
// Limit is the limit applied.
func parseOverrideReply(reply string, checks []core.Check, results []core.Result) error {
	cut := strings.LastIndexByte(reply, ';')
	if cut < 0 {
		return fmt.Errorf("%w: %q: no override part", core.ErrMalformedReply, clip(reply))
	}
	limits := make([]core.Check, len(checks))
	pos := cut + 1
	for i := range checks {
		limits[i] = checks[i]
		var v [3]int64
		for j := range v {
			if j > 0 || i > 0 {
				if pos >= len(reply) || reply[pos] != ' ' {
					return fmt.Errorf("%w: %q: want %d integers after ';'", core.ErrMalformedReply, clip(reply), 3*len(checks))
				}
				pos++
			}
			n, next, ok := parseInt(reply, pos)
			if !ok {
				return fmt.Errorf("%w: %q: bad integer at byte %d", core.ErrMalformedReply, clip(reply), pos)
			}
			v[j], pos = n, next
		}
		if v == [3]int64{} {
			continue
		}
		var lim core.Limit
		ok := v[0] <= core.MaxRate && v[2] <= core.MaxRate && v[1] >= 1 && v[1] <= core.MaxPeriod.Milliseconds()
		if ok {
			lim, ok = storecheck.Applied(&checks[i], core.Limit{Rate: int(v[0]), Period: time.Duration(v[1]) * time.Millisecond, Burst: int(v[2])})
		}
		if !ok {
			return fmt.Errorf("%w: %q: override %d %d %d out of range for %v", core.ErrMalformedReply, clip(reply), v[0], v[1], v[2], checks[i].Limit)
		}
		limits[i].Limit = lim
	}
	if pos != len(reply) {
		return fmt.Errorf("%w: %q: trailing bytes", core.ErrMalformedReply, clip(reply))
	}
	return parseReply(reply[:cut], limits, results)
}
