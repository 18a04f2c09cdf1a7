package tickets

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// SpentStore is a verifier's one-time memory of ticket nonces. Every implementation keeps the same promises as
// SpentNonces: a nonce spent once is refused until its ticket could no longer pass an exp check (leeway included);
// nothing still valid is ever forgotten to make room; and one subject's spent nonces are bounded so that subject
// can neither fill the store nor affect any other subject's tickets.
type SpentStore interface {
	// Spend records the nonce of a verified ticket, minted for subject and expiring at exp, that a verifier with
	// this leeway accepted. It answers nil the first time; a *Error with ReasonReplayed when the nonce was spent
	// already or the subject holds as many live spent nonces as the store keeps for one subject; and a *Error with
	// ReasonUnavailable (errors.Is ErrUnavailable) when the store could not answer: that ticket is refused, not
	// spent, and may be presented again.
	Spend(ctx context.Context, nonce, subject string, exp time.Time, leeway time.Duration) error
}

// spentBucket is how finely spent nonces are grouped by expiry: a whole bucket is forgotten at once, as soon as the
// last ticket it could hold has expired (with the leeway).
const spentBucket = 10 * time.Second

// SpentNonces is the one-time memory of tickets: every spent nonce is kept, grouped by its ticket's expiry, until
// that ticket could no longer pass its exp check, then the whole group is dropped. Nothing valid is ever evicted,
// so no flood can make a spent ticket usable again or refuse another owner's fresh ticket.
//
// Memory is bounded per subject (the API key owner a ticket was minted for): a subject may hold at most Size live
// spent nonces. A subject over it has its own further tickets refused until some expire; every other subject is
// untouched. Minting is rate-limited per subject too (Issuer), so with the defaults the bound is never reached.
// Safe for concurrent use.
type SpentNonces struct {
	mu        sync.Mutex
	buckets   map[int64]map[string]string // expiry bucket -> nonce -> subject
	live      map[string]int              // subject -> spent nonces still held
	total     int
	size      int
	grace     time.Duration // the largest leeway of the verifiers using the store
	now       func() time.Time
	lastPrune time.Time
}

// NewSpentNonces returns an empty store holding up to size live spent nonces per subject; now is the clock (nil:
// time.Now).
func NewSpentNonces(size int, now func() time.Time) (*SpentNonces, error) {
	if size <= 0 {
		return nil, fmt.Errorf("replay cache size must be positive, not %d", size)
	}
	if now == nil {
		now = time.Now
	}
	return &SpentNonces{buckets: map[int64]map[string]string{}, live: map[string]int{}, size: size, now: now}, nil
}

// Resize changes how many live spent nonces one subject may hold. Nothing is forgotten: a subject already over a
// smaller size has its new tickets refused until enough of its spent ones expire.
func (s *SpentNonces) Resize(size int) error {
	if size <= 0 {
		return fmt.Errorf("replay cache size must be positive, not %d", size)
	}
	s.mu.Lock()
	s.size = size
	s.mu.Unlock()
	return nil
}

// Size is how many live spent nonces one subject may hold.
func (s *SpentNonces) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Len is how many nonces are remembered, all subjects together.
func (s *SpentNonces) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// useLeeway widens the grace before any nonce is spent through a verifier with that leeway: from then on no prune,
// whichever verifier triggers it, drops a nonce that verifier would still accept.
func (s *SpentNonces) useLeeway(leeway time.Duration) {
	s.mu.Lock()
	s.grace = max(s.grace, leeway)
	s.mu.Unlock()
}

// bucketOf is the bucket of a ticket expiring at exp: the first bucket boundary at or after exp. It depends on exp
// alone (signed, so a replay lands in the same bucket), never on the leeway, which may grow while nonces are held.
func bucketOf(exp time.Time) int64 {
	end := exp.UnixNano()
	w := int64(spentBucket)
	k := end / w
	if end%w != 0 {
		k++
	}
	return k
}

// prune drops every bucket whose tickets have all expired, leeway included: a bucket k holds tickets expiring at or
// before k*spentBucket, which pass no exp check after k*spentBucket + grace. It runs at most once per second of the
// store's clock.
func (s *SpentNonces) prune(now time.Time) {
	if now.Sub(s.lastPrune) < time.Second && now.After(s.lastPrune) {
		return
	}
	s.lastPrune = now
	limit := now.Add(-s.grace).UnixNano() / int64(spentBucket)
	for k, b := range s.buckets {
		if k > limit {
			continue
		}
		for _, subject := range b {
			if s.live[subject]--; s.live[subject] <= 0 {
				delete(s.live, subject)
			}
		}
		s.total -= len(b)
		delete(s.buckets, k)
	}
}

// Spend records nonce, of a ticket minted for subject and expiring at exp, as spent; it reports a replay, or a
// subject holding too many live spent nonces. Memory never fails, so it never answers ReasonUnavailable.
func (s *SpentNonces) Spend(_ context.Context, nonce, subject string, exp time.Time, leeway time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A verifier made before this one registered its leeway (useLeeway); this covers a store shared by hand.
	s.grace = max(s.grace, leeway)
	now := s.now()
	s.prune(now)
	k := bucketOf(exp)
	b := s.buckets[k]
	if _, seen := b[nonce]; seen {
		// A replay carries the same signed exp, so it lands in the same bucket.
		return refuse(ReasonReplayed, "nonce %s already spent", nonce)
	}
	if s.live[subject] >= s.size {
		return refuse(ReasonReplayed, "subject %q holds %d live spent tickets, the most the replay cache keeps for one subject", subject, s.size)
	}
	if b == nil {
		b = map[string]string{}
		s.buckets[k] = b
	}
	b[nonce] = subject
	s.live[subject]++
	s.total++
	return nil
}
