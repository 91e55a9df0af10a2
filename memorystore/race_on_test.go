//go:build race

package memorystore_test

const raceEnabled = true
