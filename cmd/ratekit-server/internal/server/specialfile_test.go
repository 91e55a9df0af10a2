//go:build linux

package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartRefusesSpecialFiles: a FIFO or a symlink to /dev/zero in the
// configuration directory stops the start at once with an error naming it,
// instead of hanging on the FIFO or reading /dev/zero without end.
func TestStartRefusesSpecialFiles(t *testing.T) {
	for name, mk := range map[string]func(string) error{
		"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"dev-zero": func(p string) error { return os.Symlink("/dev/zero", p) },
	} {
		t.Run(name, func(t *testing.T) {
			set := testSettings(t)
			if err := mk(filepath.Join(set.RuntimeRoot, "rl", "config", "b.yaml")); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				s, err := New(set, discard)
				if err == nil {
					s.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "b.yaml") || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("New: %v, want b.yaml refused as not a regular file", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("New has not returned within 10s")
			}
		})
	}
}
