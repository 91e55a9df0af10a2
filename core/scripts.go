package core

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// scriptFiles are concatenated, in this order, into the one script that
// decides every algorithm: each algorithm file defines its check and commit
// functions, and decide.lua, last, is the entry point.
var scriptFiles = []string{"gcra.lua", "fixed.lua", "slidinglog.lua", "slidingcounter.lua", "decide.lua"}

// decideSource is the full source of the decide script.
var decideSource = func() string {
	var b strings.Builder
	for _, name := range scriptFiles {
		src, err := scriptFS.ReadFile("scripts/" + name)
		if err != nil {
			panic("ratekit: embedded script missing: " + name)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}()

// decideScript runs by EVALSHA, falling back to EVAL on NOSCRIPT.
var decideScript = redis.NewScript(decideSource)
