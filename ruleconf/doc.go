// Package ruleconf reads rate-limit rules from a YAML or JSON document, so
// that limits can change without a rebuild, and, with a [core.RuleSet],
// without a restart.
//
// A document names each rule and its limit:
//
//	rules:
//	  default:
//	    limit: 10          # units per period; required
//	    period: 1m         # a Go duration; default 1m
//	    algorithm: gcra    # gcra, fixed, sliding-log or sliding-counter; default gcra
//	    burst: 20          # gcra only; default the limit
//	    key: user          # a key function of the Registry; default Registry.DefaultKey
//	    plans:             # per-plan limits, picked by Registry.Plan
//	      pro: 100                          # 100 per the rule's period
//	      team: {limit: 1000, period: 1h}   # period and burst default to the rule's period and the plan's limit
//	  strict: {limit: 2, period: 1m, cost: 1, shadow: false}
//
// JSON is read by the same parser, as the YAML subset it is:
//
//	{"rules": {"default": {"limit": 10, "period": "1m", "plans": {"pro": 100}}}}
//
// # Fields
//
// Each rule is a mapping of these fields; any other field is an error:
//
//   - limit: the rule's rate, the units allowed per period; required. With
//     plans, the limit of a request whose plan the table does not name, or
//     that has no plan: never "no limit".
//   - period: a Go duration ("1s", "1m", "1h30m"; no days), a whole number
//     of milliseconds; default [DefaultPeriod].
//   - algorithm: a name of [core.ParseAlgorithm]; default gcra.
//   - burst: the GCRA bucket's capacity; default the limit. Refused for the
//     window algorithms, whose capacity is their limit.
//   - key: the name of a key function of the [Registry]; default the
//     registry's DefaultKey.
//   - plans: a mapping of plan names to limits, each a number (that many
//     per the rule's period, with a burst of that number) or a mapping of
//     limit (required), period and burst with the same defaults. Plans
//     share the rule's algorithm: they share its storage keys too, and a
//     caller who changes plans keeps what it spent. A plans table needs
//     [Registry].Plan.
//   - cost: the units each request spends, a whole number from 1 to the
//     capacity of every limit of the rule; default 1.
//   - shadow: true puts the rule in shadow mode ([core.Rule].Shadow);
//     default false.
//
// Every limit is checked with [core.Limit.Validate], rule names as
// [core.NewRuleSet] checks them, and no two rules may share a name.
//
// # Order
//
// Rules come out in the order the document writes them. rules may also
// be a list, each rule then naming itself:
//
//	rules:
//	  - {name: default, limit: 10}
//	  - {name: strict, limit: 2}
//
// Anchors, aliases and merge keys ("<<: *base") work as in any YAML
// document; a rule merged into the rules mapping takes the place of its
// merge key. Top-level fields whose names start with "x-" are ignored, a
// place for anchors that are no rule of their own:
//
//	x-hourly: &hourly {period: 1h, algorithm: sliding-counter}
//	rules:
//	  search: {<<: *hourly, limit: 1000}
//	  export: {<<: *hourly, limit: 20}
//
// Values are typed strictly: limit: "10" (a string) or
// period: 60 (a number without a unit) is an error, not a guess.
//
// # Errors
//
// An error in a document is an [*Error] that says where, which rule and
// which field: `rules.yaml:3: rule "strict": period: want a Go duration
// such as 1m or 30s, got "soon"`. It wraps [core.ErrInvalidLimit] for an
// invalid limit, [core.ErrInvalidName] for an invalid rule name and
// [core.ErrInvalidCost] for an invalid cost.
//
// # Bounds
//
// A rules file is input a process reads while it serves, on every reload:
// whatever it holds, reading it takes a bounded time, or it is refused.
//
//   - A document may have at most [MaxSize] bytes (4 MiB). [Load] reads no
//     further than that.
//   - The decoder visits at most 262,144 nodes plus one for every two bytes
//     of the document, and counts each node every time an alias or a merge
//     key brings it in: a merge list of aliases of one empty mapping costs
//     one node per alias and per level, a mapping merged twice twice its
//     size. A document without aliases never reaches the bound (each of
//     its nodes is visited once and takes at least two bytes); one whose
//     aliases expand beyond it is refused with an [*Error] wrapping
//     [ErrTooLarge].
//   - Nesting deeper than the YAML parser allows (10,000 levels) and
//     merges within merges deeper than 16 are refused too.
//
// Measured worst case, in CPU time (BenchmarkParseHostile, on a loaded
// two-core machine, garbage collection included): about 300 to 360 ms per
// MiB of document for the slowest shape, deep flow nesting, which the YAML
// parser itself reads; 100 to 200 ms for aliases and merges that expand
// to the bound; 150 ms for an honest file of 1 MiB (some 30,000 rules).
// So a document of MaxSize costs at most about 1.5 s, and a rules file of
// ordinary size milliseconds.
//
// # Reloading
//
// [Reload] reads a file again and replaces a [core.RuleSet]'s rules, or
// keeps them when the file is bad: call it on SIGHUP, or when a watcher
// sees the file change. A rule kept under its name keeps what every
// client spent, counted under its new limit.
package ruleconf
