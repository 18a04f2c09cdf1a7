package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/redisstore"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

var fleetOnce sync.Once

type fleetReport struct {
	memoryP50, redisP50, pingP50 time.Duration
	n                            int
}

var lastFleet fleetReport

// BenchmarkTicketVerifyFleet measures what a fleet pays for one-time tickets across gateways: verifying a ticket
// with its nonce spent in Redis (loopback redis-server, one script) against the in-memory store of one gateway,
// and against a bare Redis PING round trip, in the same run. Fixed workload, measured once per process.
func BenchmarkTicketVerifyFleet(b *testing.B) {
	fleetOnce.Do(func() { lastFleet = measureFleet(b) })
	r := lastFleet
	b.ReportMetric(ms(r.memoryP50)*1000, "verify-memory-p50-us")
	b.ReportMetric(ms(r.redisP50)*1000, "verify-redis-p50-us")
	b.ReportMetric(ms(r.pingP50)*1000, "redis-ping-p50-us")
	b.ReportMetric(float64(r.redisP50)/float64(r.pingP50), "redis-verify-per-ping-x")
}

func measureFleet(b *testing.B) fleetReport {
	redis := testenv.StartRedis(b)
	cl, err := redisstore.NewClient(redisstore.Options{Addr: redis.Addr, Password: redis.Password})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	secret := []byte("bench-secret-0123456789abcdef0123456789")
	iss, err := tickets.NewIssuer(tickets.IssuerConfig{Secret: secret, MintPerMinute: -1})
	if err != nil {
		b.Fatal(err)
	}
	spent, err := redisstore.NewSpentNonces(cl, "bench:", tickets.DefaultReplayCacheSize)
	if err != nil {
		b.Fatal(err)
	}
	inRedis, _ := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret, Spent: spent})
	inMemory, _ := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret})
	want := tickets.Expect{SandboxID: "sb", Kind: tickets.KindApp}
	ctx := context.Background()
	const n = 2000
	verify := func(v *tickets.Verifier) []time.Duration {
		toks := make([]string, n)
		for i := range toks {
			tk, err := iss.Issue(tickets.IssueRequest{SandboxID: "sb", Kind: tickets.KindApp, Subject: fmt.Sprintf("owner-%d", i%10)})
			if err != nil {
				b.Fatal(err)
			}
			toks[i] = tk.Token
		}
		d := make([]time.Duration, n)
		for i, tok := range toks {
			t0 := time.Now()
			if _, err := v.VerifyContext(ctx, tok, want); err != nil {
				b.Fatal(err)
			}
			d[i] = time.Since(t0)
		}
		return d
	}
	// Warm both (connection pool, script cache) before measuring.
	verify(inRedis)
	r := fleetReport{n: n}
	r.memoryP50 = testenv.Percentile(verify(inMemory), .5)
	r.redisP50 = testenv.Percentile(verify(inRedis), .5)
	pings := make([]time.Duration, n)
	for i := range pings {
		t0 := time.Now()
		if err := cl.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		pings[i] = time.Since(t0)
	}
	r.pingP50 = testenv.Percentile(pings, .5)
	fmt.Fprintf(os.Stdout, "ticket verify, %d tickets each, p50: memory %v, redis %v (%.1fx memory), redis PING %v (verify = %.2f pings)\n",
		n, r.memoryP50, r.redisP50, float64(r.redisP50)/float64(r.memoryP50), r.pingP50, float64(r.redisP50)/float64(r.pingP50))
	return r
}
