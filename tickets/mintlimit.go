package tickets

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMintPerMinute and DefaultMintBurst bound how fast one subject (an API key's owner) mints tickets. With the
// default maximum lifetime, one subject can hold at most about 6,000 live tickets, far below the replay cache's
// per-subject bound.
const (
	DefaultMintPerMinute = 600
	DefaultMintBurst     = 120
)

// RateLimitedError is a mint refused because the subject asked too fast. RetryAfter is when one more ticket would be
// granted.
type RateLimitedError struct {
	Subject    string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("ticket minting for %q is rate-limited; retry after %s", e.Subject, e.RetryAfter.Round(time.Millisecond))
}

// mintLimiter is one token bucket per subject. Buckets that have refilled are forgotten, so the map holds only
// subjects that minted recently.
type mintLimiter struct {
	mu        sync.Mutex
	per       rate.Limit
	burst     int
	subjects  map[string]*rate.Limiter
	lastSweep time.Time
}

func newMintLimiter(perMinute, burst int) *mintLimiter {
	return &mintLimiter{per: rate.Limit(float64(perMinute) / 60), burst: burst, subjects: map[string]*rate.Limiter{}}
}

// take spends one token of subject at now, or says how long until one is there.
func (m *mintLimiter) take(subject string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) > time.Minute {
		m.lastSweep = now
		for k, l := range m.subjects {
			if l.TokensAt(now) >= float64(m.burst) {
				delete(m.subjects, k)
			}
		}
	}
	l := m.subjects[subject]
	if l == nil {
		l = rate.NewLimiter(m.per, m.burst)
		m.subjects[subject] = l
	}
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return &RateLimitedError{Subject: subject, RetryAfter: time.Minute}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &RateLimitedError{Subject: subject, RetryAfter: d}
	}
	return nil
}
