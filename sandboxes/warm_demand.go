package sandboxes

import (
	"math"
	"time"
)

// The pure arithmetic of the adaptive warm pool: what demand was seen, how long a cold start takes, how many
// refills the engine sustains. Every function takes the time as an argument, so tests drive it with a fake clock.

// warmHeadroom multiplies the demand a pool must absorb: arrivals are bursty, and a pool sized exactly to the
// last peak runs dry on the next one that is a little larger.
const warmHeadroom = 1.5

// maxDemandSamples bounds the arrival times one profile keeps (a create storm cannot grow memory without bound;
// past it the oldest are dropped, which only makes the pool shrink earlier).
const maxDemandSamples = 8192

// demandWindow remembers create arrivals of one profile over a horizon.
type demandWindow struct {
	arrivals []time.Time // oldest first
}

func (d *demandWindow) record(at time.Time) {
	if len(d.arrivals) >= maxDemandSamples {
		d.arrivals = append(d.arrivals[:0], d.arrivals[1:]...)
	}
	d.arrivals = append(d.arrivals, at)
}

// prune forgets arrivals older than horizon.
func (d *demandWindow) prune(now time.Time, horizon time.Duration) {
	cut := 0
	for cut < len(d.arrivals) && now.Sub(d.arrivals[cut]) > horizon {
		cut++
	}
	if cut > 0 {
		d.arrivals = append(d.arrivals[:0], d.arrivals[cut:]...)
	}
}

// peak is the largest number of arrivals inside any span of length w among those kept: the demand the pool must
// have ready, since a member used up is back only one cold start later. O(n).
func (d *demandWindow) peak(w time.Duration) int {
	best, lo := 0, 0
	for hi := range d.arrivals {
		for d.arrivals[hi].Sub(d.arrivals[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// maxRefillRounds bounds how far demandBeforeRefill widens its window (each round is one peak, O(n)).
const maxRefillRounds = 16

// demandBeforeRefill is the demand a pool must hold: the most creates that arrive before the members they claim can
// be back. A claimed member is replaced one cold start later only while a refill slot is free: with k claims and
// slots refills at a time the last replacement is ready ceil(k/slots) cold starts later, and whatever arrives in
// between must find the pool stocked too. So the window starts at one cold start and widens to ceil(peak/slots)
// cold starts while the peak inside it outnumbers the slots (a fast engine's short cold start no longer hides an
// overload its refills cannot keep up with), up to horizon, the demand remembered.
func (d *demandWindow) demandBeforeRefill(coldStart time.Duration, slots int, horizon time.Duration) int {
	w := coldStart
	peak := d.peak(w)
	for range maxRefillRounds {
		if slots <= 0 || peak <= slots {
			break
		}
		next := min(time.Duration((peak+slots-1)/slots)*coldStart, horizon)
		if next <= w {
			break
		}
		w = next
		peak = d.peak(w)
	}
	return peak
}

// poolTarget is the number of members a pool keeps: the demand before a refill (demandBeforeRefill), times
// headroom, bounded by [floor, ceiling].
func poolTarget(peak int, floor, ceiling int) int {
	t := int(math.Ceil(float64(peak) * warmHeadroom))
	if t > ceiling {
		t = ceiling
	}
	return max(t, floor)
}

// ewma is an exponentially weighted mean; the zero value has no samples.
type ewma struct {
	v float64
	n int
}

const ewmaAlpha = 0.3

func (e *ewma) add(x float64) {
	if e.n == 0 {
		e.v = x
	} else {
		e.v = ewmaAlpha*x + (1-ewmaAlpha)*e.v
	}
	e.n++
}

// concurrencyTuner finds how many starts at once give the engine its best throughput, from the starts it
// measures: a start that got its slot while k launches worked on the engine (itself included) took d to be
// ready, so at level k the engine completes about k/d starts per second. The limit is the level with the best
// measured throughput; the level above it is probed until it has samples, and again every reprobeEvery
// completions (the machine's load changes), and kept only if it beats the current one by more than the noise
// margin.
type concurrencyTuner struct {
	ceiling   int
	lat       []ewma // seconds per start, by level (index 0 unused)
	sinceBest int
}

const (
	tunerMinSamples = 2
	tunerMargin     = 1.05
	reprobeEvery    = 16
)

func newConcurrencyTuner(ceiling int) *concurrencyTuner {
	ceiling = max(1, ceiling)
	return &concurrencyTuner{ceiling: ceiling, lat: make([]ewma, ceiling+1)}
}

func (t *concurrencyTuner) setCeiling(ceiling int) {
	ceiling = max(1, ceiling)
	for len(t.lat) < ceiling+1 {
		t.lat = append(t.lat, ewma{})
	}
	t.ceiling = ceiling
}

// observe records one start that began at concurrency level k and took d.
func (t *concurrencyTuner) observe(k int, d time.Duration) {
	if k < 1 || d <= 0 {
		return
	}
	k = min(k, len(t.lat)-1)
	t.lat[k].add(d.Seconds())
	t.sinceBest++
	if t.sinceBest >= reprobeEvery {
		// Forget the level above the best, so it is measured again under today's load.
		t.sinceBest = 0
		if b := t.best(); b+1 < len(t.lat) {
			t.lat[b+1] = ewma{}
		}
	}
}

// throughput is the measured starts per second at level k, or 0 without enough samples.
func (t *concurrencyTuner) throughput(k int) float64 {
	if k >= len(t.lat) || t.lat[k].n < tunerMinSamples || t.lat[k].v <= 0 {
		return 0
	}
	return float64(k) / t.lat[k].v
}

func (t *concurrencyTuner) best() int {
	best, bestTP := 1, t.throughput(1)
	for k := 2; k <= t.ceiling; k++ {
		if tp := t.throughput(k); tp > bestTP*tunerMargin {
			best, bestTP = k, tp
		}
	}
	return best
}

// limit is the concurrency to run refills at now.
func (t *concurrencyTuner) limit() int {
	b := t.best()
	if b < t.ceiling && t.lat[b].n >= tunerMinSamples && t.lat[b+1].n < tunerMinSamples {
		return b + 1 // probe one level up
	}
	return b
}

// warmBackoff is the pause after the n-th refill failure in a row: 1, 2, 4 ... base, at most warmBackoffMax.
func warmBackoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < warmBackoffMax; i++ {
		d *= 2
	}
	return min(d, warmBackoffMax)
}

const warmBackoffMax = 5 * time.Minute
