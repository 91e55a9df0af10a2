package caddyratekit_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Caddy keeps its data (locks, autosaved config) under
	// XDG_DATA_HOME and XDG_CONFIG_HOME: a directory of the test run's
	// own, never the user's.
	dir, err := os.MkdirTemp("", "caddyratekit-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	// every goroutine a test started has ended by the end of the run
	goleak.VerifyTestMain(&exitCleanup{m, dir}, goleak.IgnoreAnyFunction(caddyLockHeartbeat))
}

// exitCleanup runs the tests, then removes the data directory.
type exitCleanup struct {
	m   *testing.M
	dir string
}

func (e *exitCleanup) Run() int {
	code := e.m.Run()
	os.RemoveAll(e.dir)
	return code
}
