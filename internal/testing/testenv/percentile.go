package testenv

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of d, leaving d unsorted; 0 for no samples.
// Benchmarks report every latency through it so that figures of different benchmarks mean the same thing.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(p * float64(len(s))))
	return s[min(len(s), max(1, rank))-1]
}
