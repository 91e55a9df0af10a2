// Package mdsection reads and replaces a marked section of a markdown file.
//
// docs/benchmarks.md has two writers: bench/run.sh (bench/cmd/compare)
// rewrites the whole file, and bench/e2e.sh (bench/cmd/e2e) writes only the
// end-to-end section, between the lines [Begin] and [End]. compare copies
// that section from the file it replaces into the new one, so each
// writer's figures survive the other's runs.
package mdsection

import (
	"errors"
	"os"
	"strings"
)

// The markers of the end-to-end section, each on a line of its own.
const (
	Begin = "<!-- e2e:begin -->"
	End   = "<!-- e2e:end -->"
)

// Find returns the section of doc from the Begin line to the End line,
// both included, with a final newline. ok is false when doc holds no
// complete section.
func Find(doc string) (section string, ok bool) {
	i, j, ok := bounds(doc)
	if !ok {
		return "", false
	}
	return doc[i:j], true
}

// Replace returns doc with its section replaced by section, which must
// start with the Begin line and end with the End line. When doc has no
// section, section is appended after a blank line.
func Replace(doc, section string) string {
	if !strings.HasSuffix(section, "\n") {
		section += "\n"
	}
	i, j, ok := bounds(doc)
	if !ok {
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + section
	}
	return doc[:i] + section + doc[j:]
}

// bounds returns the byte offsets of the section in doc: from the start of
// the Begin line to just after the End line's newline.
func bounds(doc string) (i, j int, ok bool) {
	i = lineIndex(doc, Begin, 0)
	if i < 0 {
		return 0, 0, false
	}
	e := lineIndex(doc, End, i+len(Begin))
	if e < 0 {
		return 0, 0, false
	}
	j = e + len(End)
	if j < len(doc) && doc[j] == '\n' {
		j++
	}
	return i, j, true
}

// lineIndex returns the offset of the first line of doc, at or after from,
// that is exactly marker (trailing spaces and a carriage return allowed),
// or -1.
func lineIndex(doc, marker string, from int) int {
	for from <= len(doc) {
		k := strings.Index(doc[from:], marker)
		if k < 0 {
			return -1
		}
		k += from
		startsLine := k == 0 || doc[k-1] == '\n'
		rest := doc[k+len(marker):]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		if startsLine && strings.TrimRight(rest, " \t\r") == "" {
			return k
		}
		from = k + len(marker)
	}
	return -1
}

// FromFile returns the section of the file at path; ok is false when the
// file does not exist or holds no section.
func FromFile(path string) (section string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	section, ok = Find(string(b))
	return section, ok, nil
}
