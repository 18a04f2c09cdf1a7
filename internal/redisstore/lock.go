package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotHeld is an Unlock of a lock this Storage does not hold (any more): never locked here, or it expired while
// its refresher could not reach Redis and another gateway may have taken it.
var ErrNotHeld = errors.New("redis storage: lock not held")

// refreshScript extends the lock KEYS[1] by ARGV[2] ms if it still carries our token ARGV[1].
var refreshScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

// releaseScript deletes the lock KEYS[1] only if it carries our token ARGV[1]: a holder whose lock expired and was
// taken by another gateway must not release that gateway's lock.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Lock implements certmagic.Locker: SET NX PX with a random token, retried every lockPoll until it is free or ctx
// ends; while held, a goroutine refreshes it every third of the TTL, so only a dead (or cut-off) holder lets it
// expire.
func (s *Storage) Lock(ctx context.Context, name string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("redis storage: lock token: %w", err)
	}
	token := hex.EncodeToString(b[:])
	key := s.lockKey(name)
	for {
		ok, err := s.client.SetNX(ctx, key, token, s.lockTTL).Result()
		if err != nil {
			return fmt.Errorf("redis storage: locking %s: %w", name, err)
		}
		if ok {
			break
		}
		t := time.NewTimer(s.lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("redis storage: waiting for lock %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
	rctx, stop := context.WithCancel(context.Background())
	h := &heldLock{token: token, stop: stop, done: make(chan struct{})}
	go s.refresh(rctx, key, h)
	s.mu.Lock()
	if old := s.held[name]; old != nil {
		// Ours expired (its refresher was cut off from Redis) and we took it again: the old holder has lost it.
		old.stop()
	}
	s.held[name] = h
	s.mu.Unlock()
	return nil
}

func (s *Storage) refresh(ctx context.Context, key string, h *heldLock) {
	defer close(h.done)
	tick := time.NewTicker(s.lockTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := refreshScript.Run(ctx, s.client, []string{key}, h.token, s.lockTTL.Milliseconds()).Int()
		if err == nil && n == 0 {
			return // lost: expired and maybe taken; Unlock will say so
		}
		// A failed call is retried at the next tick, while the lock has two thirds of its TTL left.
	}
}

// Unlock implements certmagic.Locker: it releases the lock only if this Storage still holds it.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: %s", ErrNotHeld, name)
	}
	h.stop()
	<-h.done
	n, err := releaseScript.Run(ctx, s.client, []string{s.lockKey(name)}, h.token).Int()
	if err != nil {
		return fmt.Errorf("redis storage: unlocking %s: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s expired before it was released", ErrNotHeld, name)
	}
	return nil
}

// Close stops the refreshers of the locks still held: they expire in Redis after the lock TTL unless released.
// Their tokens are kept, so an Unlock that comes after Close still releases them (Caddy stops its apps, which
// closes this storage, and then cleans up the locks certmagic holds).
func (s *Storage) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.held {
		h.stop()
	}
}
