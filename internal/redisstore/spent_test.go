package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

var secret = []byte("0123456789abcdef0123456789abcdef-redis")

// startRedis runs a real redis-server for one test; under -short the test skips (it starts a process).
func startRedis(t *testing.T) *testenv.Redis {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server: runs without -short")
	}
	return testenv.StartRedis(t)
}

// client is one gateway's view of Redis: its own connections, as another process would have.
func client(t *testing.T, r *testenv.Redis) *redis.Client {
	t.Helper()
	c, err := NewClient(Options{Addr: r.Addr, Password: r.Password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// verifier is one gateway's ticket verifier over its own client to the shared Redis.
func verifier(t *testing.T, c *redis.Client, size int) (*tickets.Verifier, *SpentNonces) {
	t.Helper()
	spent, err := NewSpentNonces(c, "test:", size)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret, Spent: spent})
	if err != nil {
		t.Fatal(err)
	}
	return v, spent
}

func issue(t *testing.T, iss *tickets.Issuer, subject string) string {
	t.Helper()
	tk, err := iss.Issue(tickets.IssueRequest{SandboxID: "sb-1", Kind: tickets.KindApp, Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	return tk.Token
}

func newIssuer(t *testing.T) *tickets.Issuer {
	t.Helper()
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: secret, MintPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

func reason(err error) tickets.Reason {
	var te *tickets.Error
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}

var want = tickets.Expect{SandboxID: "sb-1", Kind: tickets.KindApp}

// TestSpentOnceAcrossGateways: a ticket spent through one gateway's verifier is refused by another's, over separate
// connections to one Redis, and by the first one again.
func TestSpentOnceAcrossGateways(t *testing.T) {
	r := startRedis(t)
	a, _ := verifier(t, client(t, r), 100)
	b, _ := verifier(t, client(t, r), 100)
	iss := newIssuer(t)
	tok := issue(t, iss, "alice")
	if _, err := a.Verify(tok, want); err != nil {
		t.Fatalf("first use through A: %v", err)
	}
	for name, v := range map[string]*tickets.Verifier{"B": b, "A": a} {
		if _, err := v.Verify(tok, want); reason(err) != tickets.ReasonReplayed {
			t.Fatalf("replay through %s: want replayed, got %v", name, err)
		}
	}
	// Another ticket of the same subject is untouched.
	if _, err := b.Verify(issue(t, iss, "alice"), want); err != nil {
		t.Fatalf("a fresh ticket through B: %v", err)
	}
}

// TestSpentRaceHasOneWinner: many gateways presenting one ticket at the same moment; exactly one is admitted.
func TestSpentRaceHasOneWinner(t *testing.T) {
	r := startRedis(t)
	var vs []*tickets.Verifier
	for range 4 {
		v, _ := verifier(t, client(t, r), 100)
		vs = append(vs, v)
	}
	tok := issue(t, newIssuer(t), "alice")
	var wins, replays atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			_, err := vs[i%len(vs)].Verify(tok, want)
			switch {
			case err == nil:
				wins.Add(1)
			case reason(err) == tickets.ReasonReplayed:
				replays.Add(1)
			default:
				t.Errorf("unexpected refusal: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || replays.Load() != 31 {
		t.Fatalf("%d admitted and %d replays; want 1 and 31", wins.Load(), replays.Load())
	}
}

// TestSpentFloodStaysWithItsSubject is the attack: one owner spends as many tickets as the store keeps for one
// subject and more. Its further tickets are refused, none of its spent ones becomes usable again, and another
// owner's tickets verify through any gateway.
func TestSpentFloodStaysWithItsSubject(t *testing.T) {
	r := startRedis(t)
	const size = 40
	a, _ := verifier(t, client(t, r), size)
	b, _ := verifier(t, client(t, r), size)
	iss := newIssuer(t)
	var spent []string
	for i := range size {
		tok := issue(t, iss, "mallory")
		v := a
		if i%2 == 1 {
			v = b
		}
		if _, err := v.Verify(tok, want); err != nil {
			t.Fatalf("mallory's ticket %d: %v", i, err)
		}
		spent = append(spent, tok)
	}
	if _, err := a.Verify(issue(t, iss, "mallory"), want); reason(err) != tickets.ReasonReplayed {
		t.Fatalf("mallory over the bound: want refused, got %v", err)
	}
	for i, tok := range spent {
		if _, err := b.Verify(tok, want); reason(err) != tickets.ReasonReplayed {
			t.Fatalf("mallory's spent ticket %d usable again after the flood: %v", i, err)
		}
	}
	for _, v := range []*tickets.Verifier{a, b} {
		if _, err := v.Verify(issue(t, iss, "alice"), want); err != nil {
			t.Fatalf("alice's ticket refused after mallory's flood: %v", err)
		}
	}
}

// TestSpentKeptUntilExpiryAndLeeway: a nonce is kept until its ticket's exp + leeway + the extra, by Redis's own
// expiry, and the subject's set expires with its last nonce. Read from Redis, no waiting.
func TestSpentKeptUntilExpiryAndLeeway(t *testing.T) {
	r := startRedis(t)
	c := client(t, r)
	spent, _ := NewSpentNonces(c, "test:", 10)
	exp := time.Now().Add(90 * time.Second).Truncate(time.Second)
	ctx := context.Background()
	if err := spent.Spend(ctx, "n1", "alice", exp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	keep := exp.Add(5*time.Second + DefaultRetainExtra).UnixMilli()
	set := "test:spent:{" + hashed("alice") + "}"
	for _, key := range []string{set + ":" + hashed("n1"), set} {
		at, err := c.Do(ctx, "PEXPIRETIME", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if at != keep {
			t.Fatalf("%s expires at %d, want %d", key, at, keep)
		}
	}
	// A ticket already past its retention by Redis's clock is refused, never recorded for no time.
	if err := spent.Spend(ctx, "n2", "alice", time.Now().Add(-10*time.Minute), 0); reason(err) != tickets.ReasonExpired {
		t.Fatalf("want expired, got %v", err)
	}
}

// TestSpentFailsClosed: with Redis down a valid ticket is refused with a typed, retryable error, and it was not
// spent: once Redis is back the same ticket is admitted (once).
func TestSpentFailsClosed(t *testing.T) {
	r := startRedis(t)
	v, _ := verifier(t, client(t, r), 100)
	tok := issue(t, newIssuer(t), "alice")
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	_, err := v.VerifyContext(ctx, tok, want)
	var te *tickets.Error
	if !errors.Is(err, tickets.ErrUnavailable) || !errors.As(err, &te) || !te.Retryable() {
		t.Fatalf("redis down: want a retryable unavailable refusal, got %v", err)
	}
	r.Start(t)
	if _, err := v.VerifyContext(ctx, tok, want); err != nil {
		t.Fatalf("the same ticket once redis is back: %v", err)
	}
	if _, err := v.VerifyContext(ctx, tok, want); reason(err) != tickets.ReasonReplayed {
		t.Fatalf("replay after redis came back: %v", err)
	}
}

// TestSpentRefusesAnEvictingRedis: a Redis that may evict keys could forget a spent nonce, so it is not trusted.
func TestSpentRefusesAnEvictingRedis(t *testing.T) {
	r := startRedis(t)
	c := client(t, r)
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	v, _ := verifier(t, c, 100)
	if _, err := v.Verify(issue(t, newIssuer(t), "alice"), want); !errors.Is(err, tickets.ErrUnavailable) || !errors.Is(err, ErrEvictingPolicy) {
		t.Fatalf("want unavailable for an evicting policy, got %v", err)
	}
}

func TestNewSpentNoncesRefusesNoBound(t *testing.T) {
	if _, err := NewSpentNonces(nil, "p:", 0); err == nil {
		t.Fatal("size 0 accepted")
	}
	if _, err := NewClient(Options{}); err == nil {
		t.Fatal("no address accepted")
	}
}
