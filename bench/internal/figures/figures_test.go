package figures

import (
	"testing"
	"time"
)

func TestDur(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{740 * time.Microsecond, "740µs"},
		{2089999 * time.Nanosecond, "2.09ms"},
		{16400 * time.Microsecond, "16.4ms"},
	} {
		if got := Dur(c.d); got != c.want {
			t.Errorf("Dur(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "0"}, {999.4, "999"}, {999.5, "1,000"}, {1234567.6, "1,234,568"}, {20_000_000, "20,000,000"}} {
		if got := Thousands(c.x); got != c.want {
			t.Errorf("Thousands(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
