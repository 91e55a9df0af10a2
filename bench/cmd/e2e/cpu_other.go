//go:build !linux

package main

import "time"

// procCPU is not available here: the report leaves CPU columns empty.
func procCPU(int) (time.Duration, bool) { return 0, false }
