//go:build !unix

package redistest

import (
	"errors"
	"os"
)

var errNoJobControl = errors.New("SIGSTOP/SIGCONT are not supported on this platform")

func stopProcess(p *os.Process) error { return errNoJobControl }

func continueProcess(p *os.Process) error { return errNoJobControl }
