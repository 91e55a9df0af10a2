package ruleconf_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratekit/ratekit/ruleconf"
)

// hostile returns documents of about size bytes, each of a shape that
// makes a YAML reader do the most work per byte it knows of: aliases of
// empty mappings merged in lists (each costs nothing of a budget spent per
// key and value), a chain of merges that doubles at each step, merged
// mappings of many keys, deep flow nesting, many small rules, long keys,
// and anchors everywhere.
func hostile(size int) map[string][]byte {
	docs := map[string][]byte{}
	// x-e: &e {}; x-f: &f {<<: [*e, *e, ...]}; rules: {<<: [*f, *f, ...]}
	{
		k := max(1, (size-64)/8)
		var b strings.Builder
		b.WriteString("x-e: &e {}\nx-f: &f {<<: [")
		b.WriteString(strings.Repeat("*e, ", k-1))
		b.WriteString("*e]}\nrules:\n  <<: [")
		b.WriteString(strings.Repeat("*f, ", k-1))
		b.WriteString("*f]\n  a: {limit: 1}\n")
		docs["empty-merges"] = []byte(b.String())
	}
	// x-0: &l0 {a: {limit: 1}, b: ...}; x-i: &li {<<: [*l(i-1), *l(i-1)]},
	// 15 levels, within the merge depth; the rules merge the last, as
	// often as the size allows
	{
		var b strings.Builder
		b.WriteString("x-0: &l0 {a: {limit: 1}, b: {limit: 1}}\n")
		for i := 1; i <= 15; i++ {
			fmt.Fprintf(&b, "x-%d: &l%d {<<: [*l%d, *l%d]}\n", i, i, i-1, i-1)
		}
		b.WriteString("rules:\n  <<: [")
		n := max(1, (size-b.Len())/6)
		b.WriteString(strings.Repeat("*l15, ", n-1))
		b.WriteString("*l15]\n")
		docs["doubling-merges"] = []byte(b.String())
	}
	// x-m: &m {k0: {limit: 1}, k1: ...}; rules: {<<: [*m, *m, ...]}: every
	// alias brings every key again, to be deduplicated
	{
		var b strings.Builder
		b.WriteString("x-m: &m {")
		keys := max(1, size/40)
		for i := range keys {
			fmt.Fprintf(&b, "k%d: {limit: 1}, ", i)
		}
		b.WriteString("z: {limit: 1}}\nrules:\n  <<: [")
		n := max(1, (size-b.Len())/4)
		b.WriteString(strings.Repeat("*m, ", n-1))
		b.WriteString("*m]\n")
		docs["wide-merges"] = []byte(b.String())
	}
	// x-i: [[[[...]]]], as deep as the parser goes, as often as fits
	{
		depth := min(size/2-8, 9000)
		nest := strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n"
		var b strings.Builder
		for i := 0; b.Len()+len(nest)+8 <= size || i == 0; i++ {
			fmt.Fprintf(&b, "x-%d: %s", i, nest)
		}
		b.WriteString("rules: {}\n")
		docs["deep-flow"] = []byte(b.String())
	}
	// x-i: {a: {a: {a: ...}}}, block style, as deep as fits in a line
	{
		var b strings.Builder
		depth := 0
		for b.Len() < size-16 && depth < 9000 {
			b.WriteString(strings.Repeat(" ", depth) + "a:\n")
			depth++
		}
		docs["deep-block"] = []byte("x-" + b.String()[0:] + strings.Repeat(" ", depth) + "b: 1\nrules: {}\n")
	}
	// many small rules, each valid: the largest honest document
	{
		var b strings.Builder
		b.WriteString("rules:\n")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "  r%d: {limit: %d, period: 1m}\n", i, i%100+1)
		}
		docs["many-rules"] = []byte(b.String())
	}
	// one rule whose plans table has many plans, each an alias of one plan
	{
		var b strings.Builder
		b.WriteString("x-p: &p {limit: 5, period: 1h, burst: 5}\nrules:\n  a:\n    limit: 1\n    plans:\n")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "      p%d: *p\n", i)
		}
		docs["aliased-plans"] = []byte(b.String())
	}
	// a key as long as the document, written as an explicit key
	docs["long-key"] = []byte("rules:\n  ? " + strings.Repeat("k", max(1, size-24)) + "\n  : {limit: 1}\n")
	// an anchor on every node, and an alias of each
	{
		var b strings.Builder
		b.WriteString("x-a: [")
		n := max(1, size/24)
		for i := range n {
			fmt.Fprintf(&b, "&a%d {}, ", i)
		}
		b.WriteString("{}]\nrules:\n  <<: [")
		for i := range n {
			fmt.Fprintf(&b, "*a%d, ", i)
		}
		b.WriteString("{a: {limit: 1}}]\n")
		docs["many-anchors"] = []byte(b.String())
	}
	return docs
}

// TestParseHostile parses each hostile shape at 128 KB: a shape whose
// aliases expand far beyond what its size pays for is refused with an
// error wrapping ErrTooLarge, and every other one is read (or refused for
// what it says) as any document is.
func TestParseHostile(t *testing.T) {
	const size = 128 << 10
	expanding := map[string]bool{"empty-merges": true, "doubling-merges": true, "wide-merges": true}
	for name, doc := range hostile(size) {
		t.Run(name, func(t *testing.T) {
			_, err := ruleconf.Parse(doc, registry())
			t.Logf("%d bytes: %.160v", len(doc), err)
			var e *ruleconf.Error
			if err != nil && !errors.As(err, &e) {
				t.Fatalf("error %v is not a *ruleconf.Error", err)
			}
			if got := errors.Is(err, ruleconf.ErrTooLarge); got != expanding[name] {
				t.Errorf("refused as too large: %v, want %v", got, expanding[name])
			}
			if err != nil && len(err.Error()) > 1024 {
				t.Errorf("a message of %d bytes: a log line should not quote the document", len(err.Error()))
			}
		})
	}
}

// TestParseMaxSize checks that a document of MaxSize bytes is read, and
// one byte more refused with an error wrapping ErrTooLarge, by Parse and
// by Load (which reads no further).
func TestParseMaxSize(t *testing.T) {
	doc := []byte("rules:\n  a: {limit: 1}\n")
	doc = append(doc, bytes.Repeat([]byte("#"), ruleconf.MaxSize-len(doc))...) // a comment: cheap to read
	if _, err := ruleconf.Parse(doc, registry()); err != nil {
		t.Fatalf("a document of MaxSize bytes: %.200v", err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, append(doc, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ruleconf.Load(path, registry())
	if !errors.Is(err, ruleconf.ErrTooLarge) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load of MaxSize+1 bytes: %v, want an error of the file wrapping ErrTooLarge", err)
	}
}

// BenchmarkParseHostile measures Parse of each hostile shape at 1 MiB,
// reported per MiB of document in milliseconds of wall time and of CPU
// time (the process's, garbage collection included, which a loaded
// machine disturbs less): the bound the package documentation gives is the
// slowest of them. many-rules is the honest document, for comparison.
func BenchmarkParseHostile(b *testing.B) {
	const size = 1 << 20
	docs := hostile(size)
	reg := registry()
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		doc := docs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				_, _ = ruleconf.Parse(doc, reg)
			}
			mib := float64(b.N) * float64(len(doc)) / size
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/mib, "ms/MiB")
			b.ReportMetric(float64((cpuTime(b)-cpu).Milliseconds())/mib, "cpu-ms/MiB")
		})
	}
}

// cpuTime returns the CPU time, user and system, that the process has
// used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
