package ruleconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/ratekit/ratekit/core"
)

// DefaultPeriod is the period of a rule or plan whose document gives none.
const DefaultPeriod = time.Minute

// ErrNoRule is returned, wrapped with the rule's name, by [Select] and
// [Reload] for a rule the document does not define.
var ErrNoRule = errors.New("ruleconf: no such rule")

// ErrTooLarge is wrapped by the [*Error] of a document larger than
// [MaxSize], or whose aliases and merges expand to more nodes than its
// size pays for (see the package documentation's Bounds).
var ErrTooLarge = errors.New("ruleconf: document too large")

// Registry is what a document's rules may refer to by name: the key
// functions and the plan function of the application. Build one at start
// up; it is only read.
type Registry struct {
	// Keys maps the names a rule's key field may use, such as "ip",
	// "apikey" or "user", to key functions. At least one is required.
	Keys map[string]core.KeyFunc
	// DefaultKey names the key function, in Keys, of a rule that names
	// none. Empty: every rule must name its key.
	DefaultKey string
	// Plan returns the plan of a request, such as the "plan" claim of a
	// verified token (keyfuncs.JWTClaimHMAC), or "" when it has none; the
	// plans tables of a document pick their limits by it
	// ([keyfuncs.PlanLimits]). Nil: a document with a plans table is refused.
	Plan func(core.Request) string
}

// check returns an error for a registry no document could use.
func (reg *Registry) check() error {
	if len(reg.Keys) == 0 {
		return errors.New("ruleconf: the Registry has no key functions")
	}
	for name, fn := range reg.Keys {
		if fn == nil {
			return fmt.Errorf("ruleconf: the Registry's key function %q is nil", name)
		}
	}
	if _, ok := reg.Keys[reg.DefaultKey]; reg.DefaultKey != "" && !ok {
		return fmt.Errorf("ruleconf: the Registry's default key %q is not one of its key functions", reg.DefaultKey)
	}
	return nil
}

// Error is an error in a document: where it is, and what is wrong.
type Error struct {
	// File is the path given to [Load] or [Reload], "" for [Parse].
	File string
	// Line is the line, from 1, of the value at fault; 0 when the
	// document could not be parsed (the cause then says where).
	Line int
	// Rule is the name of the rule at fault, "" for the document's
	// overall shape.
	Rule string
	// Field is the field at fault, such as "period" or "plans.pro.limit";
	// "" for the rule as a whole.
	Field string
	// Err is the cause. It wraps [core.ErrInvalidLimit],
	// [core.ErrInvalidName] or [core.ErrInvalidCost] where one applies.
	Err error
}

// Error returns a message such as
// `rules.yaml:3: rule "strict": period: want a Go duration such as 1m or 30s, got "soon"`.
func (e *Error) Error() string {
	b := make([]byte, 0, 64)
	if e.File != "" {
		b = append(b, e.File...)
	} else {
		b = append(b, "ruleconf"...)
	}
	switch {
	case e.Line > 0 && e.File != "":
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(e.Line), 10)
	case e.Line > 0:
		b = append(b, ": line "...)
		b = strconv.AppendInt(b, int64(e.Line), 10)
	}
	b = append(b, ": "...)
	if e.Rule != "" {
		b = append(b, "rule "...)
		b = strconv.AppendQuote(b, clip(e.Rule))
		b = append(b, ": "...)
	}
	if e.Field != "" {
		b = append(b, clip(e.Field)...)
		b = append(b, ": "...)
	}
	if e.Err == nil {
		return string(append(b, "invalid document"...))
	}
	return string(b) + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// maxNameInError bounds how much of a rule's name or a field's path an
// error message quotes: a document may hold names of any length, and a
// message is a line of a log.
const maxNameInError = 2 * core.MaxNameLen

// clip returns s, or its first maxNameInError bytes (whole UTF-8
// sequences) followed by "...".
func clip(s string) string {
	if len(s) <= maxNameInError {
		return s
	}
	cut := maxNameInError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Parse returns the rules of a YAML or JSON document (see the package
// documentation for its format), in the document's order, each with its
// key function and plan limits taken from reg. The rules pass
// [core.NewRuleSet].
//
// A document that is not valid YAML, has a field of the wrong type or an
// unknown field, names a key function reg does not have, or defines an
// invalid limit or name, yields an [*Error]. An unusable reg (no key
// functions, a nil one, or a DefaultKey it does not hold) yields an error
// of its own, whatever the document.
func Parse(data []byte, reg Registry) ([]core.Rule, error) {
	return parse(data, &reg, "")
}

// Load is [Parse] of the file at path; its errors name the file. It reads
// no more than one byte past [MaxSize].
func Load(path string, reg Registry) ([]core.Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	return parse(data, &reg, path)
}

// Reload loads the file at path and replaces set's rules with its rules,
// or, when names are given, with those rules only, in that order (as
// [Select] picks them). On any error (the file unreadable or invalid, a
// name it lacks) set keeps its rules, and the error says why: log it and
// carry on. Rules are replaced atomically, as [core.RuleSet.Replace] says.
//
// To fill several sets from one reading of the file, call [Load] once and
// [Select] and Replace for each set.
func Reload(path string, reg Registry, set *core.RuleSet, names ...string) error {
	rules, err := Load(path, reg)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		if rules, err = Select(rules, names...); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return set.Replace(rules)
}

// Select returns the rules of rules named names, in the order of names,
// such as the rules of one route. It returns an error wrapping
// [ErrNoRule] for a name that no rule has, and for no names at all.
func Select(rules []core.Rule, names ...string) ([]core.Rule, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: Select needs rule names", ErrNoRule)
	}
	out := make([]core.Rule, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(rules, func(r core.Rule) bool { return r.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: %q", ErrNoRule, name)
		}
		out = append(out, rules[i])
	}
	return out, nil
}

func parse(data []byte, reg *Registry, file string) ([]core.Rule, error) {
	if err := reg.check(); err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, &Error{File: file, Err: tooLarge(fmt.Sprintf("the document is too large: %d bytes, more than the %d a rules file may have", len(data), MaxSize))}
	}
	d := &decoder{reg: reg, file: file, size: len(data), budget: nodeBudget(len(data))}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("empty document: want a mapping with a rules field")
		}
		return nil, &Error{File: file, Err: err}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: file, Line: extra.Line, Err: errors.New("more than one document: want exactly one")}
	}
	return d.document(&root)
}
