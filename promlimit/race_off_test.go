//go:build !race

package promlimit_test

const raceEnabled = false
