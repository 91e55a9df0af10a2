//go:build unix

package redistest

import (
	"os"
	"syscall"
)

func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
