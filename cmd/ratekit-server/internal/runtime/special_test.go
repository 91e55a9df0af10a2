//go:build linux

package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/runtime"
)

// specialFiles are files that are not regular, which the loader refuses
// without reading: a FIFO (whose open or read would wait for a writer
// forever) and a symlink to /dev/zero (endless).
var specialFiles = map[string]func(path string) error{
	"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o644) },
	"dev-zero": func(p string) error { return os.Symlink("/dev/zero", p) },
	"dev-null": func(p string) error { return os.Symlink("/dev/null", p) },
}

// watchWithin runs runtime.Watch, failing the test if it has not returned
// within a generous deadline (a hung read hangs it).
func watchWithin(t *testing.T, src runtime.Source, r *recorder) *runtime.Watcher {
	t.Helper()
	type result struct {
		w   *runtime.Watcher
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := runtime.Watch(src, config.Options{}, r.apply)
		done <- result{w, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.w
	case <-time.After(10 * time.Second):
		t.Fatal("Watch has not returned within 10s: the first load hangs")
		return nil
	}
}

// TestSpecialFileRefusedAtStart: a configuration directory holding a file
// that is not regular is refused at the first load, at once.
func TestSpecialFileRefusedAtStart(t *testing.T) {
	for name, mk := range specialFiles {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cd := filepath.Join(dir, "s", "config")
			os.MkdirAll(cd, 0o755)
			os.WriteFile(filepath.Join(cd, "a.yaml"), file("a"), 0o644)
			if err := mk(filepath.Join(cd, "b.yaml")); err != nil {
				t.Fatal(err)
			}
			var r recorder
			w := watchWithin(t, runtime.Source{Root: dir, Subdirectory: "s", AppDirectory: "config"}, &r)
			defer w.Close()
			c, _, errs := r.last()
			if c != nil || errs != 1 {
				t.Fatalf("first load: config %v, %d errors; want refused", c, errs)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if msg := r.errs[0].Error(); !strings.Contains(msg, "b.yaml") || !strings.Contains(msg, "not a regular file") {
				t.Errorf("error %q, want it to name b.yaml as not a regular file", msg)
			}
		})
	}
}

// TestSpecialFileRefusedAtReload: such a file added to a loaded directory
// is refused at the next reload, the last good configuration kept, and
// the watcher goes on (a later good change applies).
func TestSpecialFileRefusedAtReload(t *testing.T) {
	for name, mk := range specialFiles {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cd := filepath.Join(dir, "s", "config")
			os.MkdirAll(cd, 0o755)
			os.WriteFile(filepath.Join(cd, "a.yaml"), file("a"), 0o644)
			var r recorder
			w := watchWithin(t, runtime.Source{Root: dir, Subdirectory: "s", AppDirectory: "config"}, &r)
			defer w.Close()
			if c, _, _ := r.last(); c == nil || c.Domain("a") == nil {
				t.Fatal("first load missing")
			}
			special := filepath.Join(cd, "b.yaml")
			if err := mk(special); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the special file refused", func() bool { _, _, e := r.last(); return e > 0 })
			os.Remove(special)
			os.WriteFile(filepath.Join(cd, "c.yaml"), file("c"), 0o644)
			waitFor(t, "a later good set applied", func() bool { c, _, _ := r.last(); return c.Domain("c") != nil })
		})
	}
}

// TestReadCapped: a regular file larger than config.MaxFileSize is
// refused, having read no more than the limit and a byte.
func TestReadCapped(t *testing.T) {
	dir := t.TempDir()
	cd := filepath.Join(dir, "s", "config")
	os.MkdirAll(cd, 0o755)
	f, err := os.Create(filepath.Join(cd, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(config.MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = runtime.Source{Root: dir, Subdirectory: "s", AppDirectory: "config"}.Read()
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Read = %v, want a file too large", err)
	}
}
