// Package figures formats and reduces the measurements that bench/cmd/compare
// and bench/cmd/e2e write into docs/benchmarks.md, so that both report them
// alike.
package figures

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var english = message.NewPrinter(language.English)

// Dur formats a latency for a table: whole µs below 1ms, else ms with two
// decimals below 10ms and one above.
func Dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
}

// Thousands rounds x to a whole number and groups its digits by
// thousands: 1234567.6 is "1,234,568".
func Thousands(x float64) string {
	return english.Sprintf("%d", int64(x+0.5))
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none; xs is reordered.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}
