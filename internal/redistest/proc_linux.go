//go:build linux

package redistest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sysProcAttr returns the attributes used to start redis-server. On Linux the
// child gets SIGKILL when the test binary dies (for example on a test
// timeout), so no redis-server outlives the tests that started it.
//
// The kernel sends that signal when the OS thread that forked the child
// exits; the Go runtime only ends threads whose goroutine exits while locked
// with runtime.LockOSThread, which these helpers never do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until the process pid is in the stopped state, so that
// Pause returns only once the server no longer serves requests.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		state, err := procState(pid)
		if err != nil {
			return err
		}
		if state == 'T' || state == 't' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still in state %q after SIGSTOP", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState returns the state letter of /proc/<pid>/stat.
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may contain spaces; the state follows
	// the last closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return b[i+2], nil
}
