package sandboxes

import (
	"context"
	"sync"
)

// Start classes: a create somebody is waiting for goes before a warm-pool refill nobody has asked for yet.
const (
	startUser = iota
	startRefill
	startClasses
)

// startQueue bounds the containers being created and started at once. Unlike a buffered channel it hands free
// slots out in a fixed order: every waiting user create in arrival order, then refills in arrival order. A burst
// larger than the pool is so served first come, first served, and refills never overtake it.
type startQueue struct {
	mu      sync.Mutex
	limit   int
	inUse   int
	waiters [startClasses][]chan struct{}
}

func newStartQueue(limit int) *startQueue { return &startQueue{limit: max(1, limit)} }

// acquire waits for a slot of the given class until ctx ends. The returned release frees it (once).
func (q *startQueue) acquire(ctx context.Context, class int) (release func(), err error) {
	q.mu.Lock()
	if q.inUse < q.limit && q.queuedLocked() == 0 {
		q.inUse++
		q.mu.Unlock()
		return q.releaser(), nil
	}
	ch := make(chan struct{})
	q.waiters[class] = append(q.waiters[class], ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return q.releaser(), nil
	case <-ctx.Done():
		q.mu.Lock()
		removed := false
		for i, w := range q.waiters[class] {
			if w == ch {
				q.waiters[class] = append(q.waiters[class][:i], q.waiters[class][i+1:]...)
				removed = true
				break
			}
		}
		q.mu.Unlock()
		if !removed {
			// Granted at the same moment: hand the slot on.
			q.releaser()()
		}
		return nil, ctx.Err()
	}
}

func (q *startQueue) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			q.inUse--
			q.grantLocked()
			q.mu.Unlock()
		})
	}
}

// grantLocked hands free slots to waiters, user creates first.
func (q *startQueue) grantLocked() {
	for q.inUse < q.limit {
		granted := false
		for c := range q.waiters {
			if len(q.waiters[c]) > 0 {
				ch := q.waiters[c][0]
				q.waiters[c] = q.waiters[c][1:]
				q.inUse++
				close(ch)
				granted = true
				break
			}
		}
		if !granted {
			return
		}
	}
}

func (q *startQueue) queuedLocked() int {
	n := 0
	for c := range q.waiters {
		n += len(q.waiters[c])
	}
	return n
}

// setLimit changes the bound; slots in use stay in use, and a raised bound admits waiters at once.
func (q *startQueue) setLimit(n int) {
	q.mu.Lock()
	q.limit = max(1, n)
	q.grantLocked()
	q.mu.Unlock()
}

// state reports slots in use and waiters per class.
func (q *startQueue) state() (inUse int, waiting [startClasses]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for c := range q.waiters {
		waiting[c] = len(q.waiters[c])
	}
	return q.inUse, waiting
}
