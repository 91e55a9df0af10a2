//go:build linux

package proccpu

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	stat := "4242 (example gin) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 9 0 123 456 789\n"
	cpu, ok := parseProcStat(stat)
	if !ok || cpu != 2870*time.Millisecond {
		t.Errorf("parseProcStat = %v, %v; want 2.87s", cpu, ok)
	}
	if _, ok := parseProcStat("garbage"); ok {
		t.Error("parsed garbage")
	}
	if _, ok := CPU(os.Getpid()); !ok {
		t.Error("cannot read this process's CPU time")
	}
}
