// Package proccpu reads the CPU time a process has used, for the
// benchmarks' per-request and per-decision CPU figures.
package proccpu
