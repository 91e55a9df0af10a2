//go:build !linux

package apptest

import "syscall"

// sysProcAttr leaves an app as exec starts it: the test's cleanup kills it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
