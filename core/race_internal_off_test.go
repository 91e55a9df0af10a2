//go:build !race

package core

// raceDetector reports whether the tests run with -race, which slows some
// of them so much that they do less work.
const raceDetector = false
