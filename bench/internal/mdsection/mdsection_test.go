package mdsection

import "testing"

func TestFindAndReplace(t *testing.T) {
	sec := Begin + "\nold\n" + End + "\n"
	doc := "# Title\n\nintro\n\n" + sec + "\n## Next\n"
	got, ok := Find(doc)
	if !ok || got != sec {
		t.Fatalf("Find = %q, %v; want %q", got, ok, sec)
	}
	repl := Begin + "\nnew\n" + End
	want := "# Title\n\nintro\n\n" + Begin + "\nnew\n" + End + "\n\n## Next\n"
	if out := Replace(doc, repl); out != want {
		t.Errorf("Replace =\n%q\nwant\n%q", out, want)
	}
}

func TestReplaceAppendsWithoutSection(t *testing.T) {
	sec := Begin + "\nx\n" + End + "\n"
	if out := Replace("# T\n", sec); out != "# T\n\n"+sec {
		t.Errorf("Replace = %q", out)
	}
	if out := Replace("", sec); out != sec {
		t.Errorf("Replace on empty = %q", out)
	}
}

func TestMarkersOnlyCountOnLinesOfTheirOwn(t *testing.T) {
	// a marker quoted inside a sentence is not a marker
	doc := "see `" + Begin + "` and `" + End + "`\n"
	if _, ok := Find(doc); ok {
		t.Errorf("found a section in %q", doc)
	}
	// a Begin without an End is no section
	if _, ok := Find(Begin + "\nno end\n"); ok {
		t.Error("found a section without an end marker")
	}
	doc = "quoted `" + Begin + "`\n" + Begin + "\nbody\n" + End + "\ntail\n"
	got, ok := Find(doc)
	if want := Begin + "\nbody\n" + End + "\n"; !ok || got != want {
		t.Errorf("Find = %q, %v; want %q", got, ok, want)
	}
}
