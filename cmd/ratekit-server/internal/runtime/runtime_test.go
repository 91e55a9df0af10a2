package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder keeps what the watcher applied.
type recorder struct {
	mu   sync.Mutex
	cfgs []*config.Config
	errs []error
}

func (r *recorder) apply(c *config.Config, _ []config.Warning, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.cfgs = append(r.cfgs, c)
}

func (r *recorder) last() (*config.Config, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cfgs) == 0 {
		return nil, 0, len(r.errs)
	}
	return r.cfgs[len(r.cfgs)-1], len(r.cfgs), len(r.errs)
}

func file(domain string) []byte {
	return []byte("domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 3s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSymlinkSwap swaps RUNTIME_ROOT to another directory, as a
// Kubernetes ConfigMap update or envoy's runtime does, and sees it.
func TestSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		d := filepath.Join(base, v, "rl", "config")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "a.yaml"), file(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(base, "current")
	if err := os.Symlink(filepath.Join(base, "v1"), root); err != nil {
		t.Fatal(err)
	}
	var r recorder
	w, err := runtime.Watch(runtime.Source{Root: root, Subdirectory: "rl", AppDirectory: "config"}, config.Options{}, r.apply)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if c, _, _ := r.last(); c == nil || c.Domain("v1") == nil {
		t.Fatal("first load missing")
	}
	tmp := filepath.Join(base, "next")
	if err := os.Symlink(filepath.Join(base, "v2"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the swap applied", func() bool { c, _, _ := r.last(); return c.Domain("v2") != nil })
}

// TestBrokenFileKept: a file that does not load is reported and nothing
// is applied; fixing it applies again; an unchanged set is not reloaded.
func TestBrokenFileKept(t *testing.T) {
	dir := t.TempDir()
	cd := filepath.Join(dir, "s", "config")
	os.MkdirAll(cd, 0o755)
	os.WriteFile(filepath.Join(cd, "a.yaml"), file("a"), 0o644)
	var r recorder
	w, err := runtime.Watch(runtime.Source{Root: dir, Subdirectory: "s", AppDirectory: "config"}, config.Options{}, r.apply)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(cd, "b.yaml"), []byte("domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: sec}\n"), 0o644)
	waitFor(t, "the broken file reported", func() bool { _, _, e := r.last(); return e > 0 })
	r.mu.Lock()
	if !strings.Contains(r.errs[0].Error(), "b.yaml:4: invalid rate limit unit 'sec'") {
		t.Errorf("error %v", r.errs[0])
	}
	r.mu.Unlock()
	os.WriteFile(filepath.Join(cd, "b.yaml"), file("b"), 0o644)
	waitFor(t, "the fixed set applied", func() bool { c, _, _ := r.last(); return c.Domain("b") != nil && c.Domain("a") != nil })
	_, loads, _ := r.last()
	time.Sleep(runtime.PollEvery + 200*time.Millisecond)
	if _, again, _ := r.last(); again != loads {
		t.Errorf("an unchanged set was applied again (%d, then %d)", loads, again)
	}
}

// TestDotFiles: dot files load unless RUNTIME_IGNOREDOTFILES, as in envoy.
func TestDotFiles(t *testing.T) {
	dir := t.TempDir()
	cd := filepath.Join(dir, "s", "config")
	os.MkdirAll(filepath.Join(cd, "..data"), 0o755)
	os.WriteFile(filepath.Join(cd, "a.yaml"), file("a"), 0o644)
	os.WriteFile(filepath.Join(cd, "..data", "a.yaml"), file("a"), 0o644)
	src := runtime.Source{Root: dir, Subdirectory: "s", AppDirectory: "config"}
	if files, _ := src.Read(); len(files) != 2 {
		t.Fatalf("%d files read with dot files", len(files))
	}
	src.IgnoreDotFiles = true
	if files, _ := src.Read(); len(files) != 1 {
		t.Fatalf("%d files read without dot files", len(files))
	}
}
