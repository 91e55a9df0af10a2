//go:build !race

package otellimit_test

// raceEnabled reports whether the tests run under the race detector,
// which allocates on its own.
const raceEnabled = false
