//go:build !linux

package redisproc

import "syscall"

// SysProcAttr returns nil: only Linux can have a child killed when its
// parent dies.
func SysProcAttr() *syscall.SysProcAttr { return nil }
