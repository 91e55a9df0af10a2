package main

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill the Caddy process if the test binary
// dies first, so that no gateway outlives its test.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
