package testenv

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := []time.Duration{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, c := range []struct {
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, .5, 0},
		{[]time.Duration{7}, .99, 7},
		{ten, .5, 5},
		{ten, .95, 10},
		{ten, .99, 10},
		{ten, .1, 1},
		{ten, 0, 1},
		{ten, 1, 10},
	} {
		if got := Percentile(c.d, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.d, c.p, got, c.want)
		}
	}
	if ten[0] != 10 {
		t.Errorf("Percentile sorted its input: %v", ten)
	}
}
