package tickets

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var secret = []byte("0123456789abcdef0123456789abcdef-test")

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPair(t *testing.T, c *clock, cacheSize int) (*Issuer, *Verifier) {
	t.Helper()
	iss, err := NewIssuer(IssuerConfig{Secret: secret, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := NewVerifier(VerifierConfig{Secret: secret, Now: c.now, ReplayCacheSize: cacheSize})
	if err != nil {
		t.Fatal(err)
	}
	return iss, ver
}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// sign makes a token with arbitrary claims and key, for the forgery cases.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validClaims(now time.Time) Claims {
	return Claims{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermWrite, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: issuerName, Audience: jwt.ClaimStrings{audienceTicket}, ID: "nonce-x",
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
	}}
}

func TestVerify(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	want := Expect{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermWrite}
	tests := []struct {
		name   string
		token  func(t *testing.T, iss *Issuer) string
		expect Expect
		later  time.Duration // clock advance before verifying
		reason Reason        // "" means accepted
	}{
		{name: "accepted", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermWrite}), expect: want},
		{name: "read ticket for a read", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindApp}),
			expect: Expect{SandboxID: "sandbox-1", Kind: KindApp, Permission: PermRead}},
		{name: "within leeway", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermWrite}),
			expect: want, later: DefaultLifetime + 3*time.Second},
		{name: "expired", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermWrite}),
			expect: want, later: DefaultLifetime + DefaultLeeway + time.Second, reason: ReasonExpired},
		{name: "wrong sandbox", token: issue(IssueRequest{SandboxID: "sandbox-2", Kind: KindTerminal, Permission: PermWrite}),
			expect: want, reason: ReasonWrongSandbox},
		{name: "wrong kind", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindCDP, Permission: PermWrite}),
			expect: want, reason: ReasonWrongKind},
		{name: "read-only used for write", token: issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindTerminal, Permission: PermRead}),
			expect: want, reason: ReasonReadOnly},
		{name: "forged with another secret", expect: want, reason: ReasonForged, token: func(t *testing.T, _ *Issuer) string {
			return sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-another"), validClaims(base))
		}},
		{name: "tampered payload", expect: want, reason: ReasonForged, token: func(t *testing.T, iss *Issuer) string {
			tok := issue(IssueRequest{SandboxID: "sandbox-2", Kind: KindTerminal, Permission: PermWrite})(t, iss)
			other := sign(t, jwt.SigningMethodHS256, secret, validClaims(base))
			p := strings.Split(tok, ".")
			q := strings.Split(other, ".")
			return p[0] + "." + q[1] + "." + p[2] // claims of one, signature of another
		}},
		{name: "alg none refused", expect: want, reason: ReasonForged, token: func(t *testing.T, _ *Issuer) string {
			return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, validClaims(base))
		}},
		{name: "RS256 refused", expect: want, reason: ReasonForged, token: func(t *testing.T, _ *Issuer) string {
			return sign(t, jwt.SigningMethodRS256, rsaKey, validClaims(base))
		}},
		{name: "HS384 refused", expect: want, reason: ReasonForged, token: func(t *testing.T, _ *Issuer) string {
			return sign(t, jwt.SigningMethodHS384, secret, validClaims(base))
		}},
		{name: "no exp refused", expect: want, reason: ReasonMalformed, token: func(t *testing.T, _ *Issuer) string {
			c := validClaims(base)
			c.ExpiresAt = nil
			return sign(t, jwt.SigningMethodHS256, secret, c)
		}},
		{name: "no nonce refused", expect: want, reason: ReasonMalformed, token: func(t *testing.T, _ *Issuer) string {
			c := validClaims(base)
			c.ID = ""
			return sign(t, jwt.SigningMethodHS256, secret, c)
		}},
		{name: "session token is not a ticket", expect: want, reason: ReasonForged, token: func(t *testing.T, _ *Issuer) string {
			c := validClaims(base)
			c.Audience = jwt.ClaimStrings{audienceSession}
			return sign(t, jwt.SigningMethodHS256, secret, c)
		}},
		{name: "garbage", expect: want, reason: ReasonMalformed, token: func(*testing.T, *Issuer) string { return "not.a.jwt" }},
		{name: "empty", expect: want, reason: ReasonMissing, token: func(*testing.T, *Issuer) string { return "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: base}
			iss, ver := newPair(t, c, 0)
			tok := tc.token(t, iss)
			c.t = c.t.Add(tc.later)
			claims, err := ver.Verify(tok, tc.expect)
			if got := reasonOf(err); got != tc.reason {
				t.Fatalf("reason = %q (err %v), want %q", got, err, tc.reason)
			}
			if tc.reason == "" && (claims == nil || claims.SandboxID != tc.expect.SandboxID) {
				t.Fatalf("claims = %+v", claims)
			}
			if err != nil && strings.Contains(err.Error(), tok) && tok != "" {
				t.Fatal("error message contains the token")
			}
		})
	}
}

func issue(req IssueRequest) func(*testing.T, *Issuer) string {
	return func(t *testing.T, iss *Issuer) string {
		t.Helper()
		tk, err := iss.Issue(req)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Token
	}
}

func TestTicketWorksOnce(t *testing.T) {
	c := &clock{t: time.Now()}
	iss, ver := newPair(t, c, 0)
	tk, err := iss.Issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindPTY, Permission: PermWrite})
	if err != nil {
		t.Fatal(err)
	}
	want := Expect{SandboxID: "sandbox-1", Kind: KindPTY, Permission: PermWrite}
	if _, err := ver.Verify(tk.Token, want); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if _, err := ver.Verify(tk.Token, want); reasonOf(err) != ReasonReplayed {
		t.Fatalf("second use: %v, want replayed", err)
	}
	// A refused presentation (wrong route) does not spend the ticket.
	tk2, _ := iss.Issue(IssueRequest{SandboxID: "sandbox-1", Kind: KindPTY, Permission: PermWrite})
	if _, err := ver.Verify(tk2.Token, Expect{SandboxID: "sandbox-1", Kind: KindCDP}); reasonOf(err) != ReasonWrongKind {
		t.Fatalf("wrong kind: %v", err)
	}
	if _, err := ver.Verify(tk2.Token, want); err != nil {
		t.Fatalf("after a wrong-route presentation: %v", err)
	}
}

// TestReplayCacheFloodStaysWithItsOwner: owner A mints and spends more live tickets than the replay cache keeps for
// one owner. A's further tickets are refused, every ticket A spent stays spent, and owner B's fresh ticket (and one
// B spent before the flood) behave as if A had done nothing. Once A's tickets expire, A is served again.
func TestReplayCacheFloodStaysWithItsOwner(t *testing.T) {
	c := &clock{t: time.Now()}
	iss, err := NewIssuer(IssuerConfig{Secret: secret, Now: c.now, MintPerMinute: -1, MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := NewVerifier(VerifierConfig{Secret: secret, Now: c.now, ReplayCacheSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := Expect{SandboxID: "s", Kind: KindApp}
	mint := func(subject string, life time.Duration) string {
		tk, err := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Subject: subject, Lifetime: life})
		if err != nil {
			t.Fatal(err)
		}
		return tk.Token
	}
	bSpent := mint("bob", 0)
	if _, err := ver.Verify(bSpent, want); err != nil {
		t.Fatal(err)
	}
	var aToks []string
	for range 5000 {
		aToks = append(aToks, mint("alice", time.Hour))
	}
	refusedA := 0
	for _, tok := range aToks {
		if _, err := ver.Verify(tok, want); err != nil {
			if reasonOf(err) != ReasonReplayed {
				t.Fatalf("alice's flood: %v", err)
			}
			refusedA++
		}
	}
	if refusedA != 4000 {
		t.Fatalf("alice's flood: %d refused, want the 4000 beyond her 1000", refusedA)
	}
	for i, tok := range aToks[:1000] {
		if _, err := ver.Verify(tok, want); reasonOf(err) != ReasonReplayed {
			t.Fatalf("alice's spent ticket %d replayed: %v", i, err)
		}
	}
	if _, err := ver.Verify(mint("bob", 0), want); err != nil {
		t.Fatalf("bob's fresh ticket after alice's flood: %v", err)
	}
	if _, err := ver.Verify(bSpent, want); reasonOf(err) != ReasonReplayed {
		t.Fatalf("bob's spent ticket after alice's flood: %v", err)
	}
	// Alice's spent tickets expire; her nonces are forgotten and she is served again.
	c.t = c.t.Add(time.Hour + DefaultLeeway + spentBucket + time.Second)
	if _, err := ver.Verify(mint("alice", 0), want); err != nil {
		t.Fatalf("alice after her tickets expired: %v", err)
	}
	if n := ver.spent.(*SpentNonces).Len(); n != 1 {
		t.Fatalf("%d nonces kept after expiry, want 1", n)
	}
}

// TestMintRateLimitPerSubject: a subject minting past its budget gets a RateLimitedError with a retry delay; another
// subject is unaffected; after the delay the first is served again.
func TestMintRateLimitPerSubject(t *testing.T) {
	c := &clock{t: time.Now()}
	iss, err := NewIssuer(IssuerConfig{Secret: secret, Now: c.now, MintPerMinute: 60, MintBurst: 5})
	if err != nil {
		t.Fatal(err)
	}
	req := func(subject string) error {
		_, err := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Subject: subject})
		return err
	}
	for i := range 5 {
		if err := req("alice"); err != nil {
			t.Fatalf("mint %d within the burst: %v", i, err)
		}
	}
	err = req("alice")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > time.Second {
		t.Fatalf("mint past the burst: %v, want a RateLimitedError of at most 1s", err)
	}
	if err := req("bob"); err != nil {
		t.Fatalf("bob while alice is limited: %v", err)
	}
	c.t = c.t.Add(rl.RetryAfter)
	if err := req("alice"); err != nil {
		t.Fatalf("alice after Retry-After: %v", err)
	}
}

func TestShortSecretRefused(t *testing.T) {
	for _, s := range [][]byte{nil, []byte("short"), secret[:MinSecretLength-1]} {
		if _, err := NewIssuer(IssuerConfig{Secret: s}); err == nil {
			t.Errorf("issuer accepted a %d-byte secret", len(s))
		}
		if _, err := NewVerifier(VerifierConfig{Secret: s}); err == nil {
			t.Errorf("verifier accepted a %d-byte secret", len(s))
		}
	}
	if _, err := NewVerifier(VerifierConfig{Secret: secret[:MinSecretLength]}); err != nil {
		t.Errorf("verifier refused a %d-byte secret: %v", MinSecretLength, err)
	}
}

func TestIssueValidates(t *testing.T) {
	iss, _ := newPair(t, &clock{t: time.Now()}, 0)
	bad := []IssueRequest{
		{Kind: KindApp},
		{SandboxID: "s", Kind: "shell"},
		{SandboxID: "s", Kind: KindApp, Permission: "admin"},
		{SandboxID: "s", Kind: KindApp, Lifetime: -time.Second},
	}
	for _, req := range bad {
		if _, err := iss.Issue(req); err == nil {
			t.Errorf("Issue(%+v) succeeded", req)
		}
	}
	tk, err := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if tk.ExpiresIn != int(DefaultMaxLifetime/time.Second) {
		t.Errorf("lifetime not capped: %d s", tk.ExpiresIn)
	}
}

func TestSession(t *testing.T) {
	c := &clock{t: time.Now()}
	iss, ver := newPair(t, c, 0)
	tk, _ := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Permission: PermRead})
	want := Expect{SandboxID: "s", Kind: KindApp}
	claims, err := ver.Verify(tk.Token, want)
	if err != nil {
		t.Fatal(err)
	}
	sess, _, err := ver.NewSession(claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // sessions are reusable
		if _, err := ver.VerifySession(sess, want); err != nil {
			t.Fatalf("session: %v", err)
		}
	}
	if _, err := ver.VerifySession(sess, Expect{SandboxID: "s", Kind: KindApp, Permission: PermWrite}); reasonOf(err) != ReasonReadOnly {
		t.Fatalf("read session for write: %v", err)
	}
	if _, err := ver.VerifySession(sess, Expect{SandboxID: "t", Kind: KindApp}); reasonOf(err) != ReasonWrongSandbox {
		t.Fatalf("session on another sandbox: %v", err)
	}
	if _, err := ver.Verify(sess, want); reasonOf(err) != ReasonForged {
		t.Fatalf("session used as a ticket: %v", err)
	}
	tk2, _ := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp})
	if _, err := ver.VerifySession(tk2.Token, want); reasonOf(err) != ReasonForged {
		t.Fatalf("ticket used as a session: %v", err)
	}
	c.t = c.t.Add(time.Minute + DefaultLeeway + time.Second)
	if _, err := ver.VerifySession(sess, want); reasonOf(err) != ReasonExpired {
		t.Fatalf("expired session: %v", err)
	}
}

// TestSharedSpentNonces: verifiers of one secret sharing a store (as across a config reload) refuse each other's
// spent tickets, and shrinking the store forgets nothing.
func TestSharedSpentNonces(t *testing.T) {
	c := &clock{t: time.Now()}
	spent, err := NewSpentNonces(10, c.now)
	if err != nil {
		t.Fatal(err)
	}
	iss, _ := NewIssuer(IssuerConfig{Secret: secret, Now: c.now})
	before, _ := NewVerifier(VerifierConfig{Secret: secret, Spent: spent, Now: c.now})
	after, _ := NewVerifier(VerifierConfig{Secret: secret, Spent: spent, Now: c.now, Leeway: time.Second})
	want := Expect{SandboxID: "s", Kind: KindApp}
	var toks []string
	for range 3 {
		tk, _ := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp})
		toks = append(toks, tk.Token)
		if _, err := before.Verify(tk.Token, want); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := after.Verify(toks[0], want); reasonOf(err) != ReasonReplayed {
		t.Fatalf("spent before the reload, replayed after: %v", err)
	}
	if err := spent.Resize(1); err != nil || spent.Len() != 3 {
		t.Fatalf("resize: %v, len %d", err, spent.Len())
	}
	if _, err := after.Verify(toks[1], want); reasonOf(err) != ReasonReplayed {
		t.Fatalf("nonce forgotten by a shrink: %v, want replayed", err)
	}
	if _, err := NewSpentNonces(0, nil); err == nil {
		t.Fatal("zero-sized store accepted")
	}
}

// FuzzVerify: the ticket parser and verifier never panic on any token, refuse with a typed reason, and a token that
// passes once never passes again.
func FuzzVerify(f *testing.F) {
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	iss, err := NewIssuer(IssuerConfig{Secret: secret, Now: c.now, MintPerMinute: -1})
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range Kinds {
		tk, _ := iss.Issue(IssueRequest{SandboxID: "sandbox-1", Kind: k, Permission: PermWrite, Subject: "alice"})
		f.Add(tk.Token, string(k))
	}
	f.Add("", "app")
	f.Add("a.b.c", "app")
	f.Add("eyJhbGciOiJub25lIn0.eyJzaWQiOiJzYW5kYm94LTEifQ.", "app")
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJpZCI6MS4wLCJzaWQiOiJzIiwic2lkIjoidCJ9.x", "cdp")
	f.Fuzz(func(t *testing.T, token, kind string) {
		ver, err := NewVerifier(VerifierConfig{Secret: secret, Now: c.now, ReplayCacheSize: 16})
		if err != nil {
			t.Fatal(err)
		}
		want := Expect{SandboxID: "sandbox-1", Kind: Kind(kind), Permission: PermRead}
		claims, err := ver.Verify(token, want)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if claims.SandboxID != "sandbox-1" || string(claims.Kind) != kind || claims.ID == "" {
			t.Fatalf("accepted claims %+v for %+v", claims, want)
		}
		if _, err := ver.Verify(token, want); reasonOf(err) != ReasonReplayed {
			t.Fatalf("accepted twice: %v", err)
		}
		_, _ = ver.VerifySession(token, want)
	})
}

// TestSpentNonceSurvivesALeewayIncrease: a reload that adds a verifier with a larger leeway must not move spent
// nonces out of reach: the ticket stays spent.
func TestSpentNonceSurvivesALeewayIncrease(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 3, 0, time.UTC)}
	spent, _ := NewSpentNonces(10, c.now)
	iss, _ := NewIssuer(IssuerConfig{Secret: secret, Now: c.now})
	before, _ := NewVerifier(VerifierConfig{Secret: secret, Spent: spent, Now: c.now, Leeway: time.Second})
	want := Expect{SandboxID: "s", Kind: KindApp}
	var toks []string
	for range 20 {
		tk, _ := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Subject: "alice", Lifetime: time.Duration(len(toks)+1) * time.Second})
		toks = append(toks, tk.Token)
	}
	for _, tok := range toks[:10] {
		if _, err := before.Verify(tok, want); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := NewVerifier(VerifierConfig{Secret: secret, Spent: spent, Now: c.now, Leeway: 9 * time.Second})
	for i, tok := range toks[:10] {
		if _, err := after.Verify(tok, want); reasonOf(err) != ReasonReplayed {
			t.Fatalf("ticket %d replayed after the leeway grew: %v", i, err)
		}
	}
}

// TestUnavailableIsTypedAndRetryable: a store that cannot answer refuses the ticket (fail closed) with an error
// callers can tell apart from a forged or replayed ticket, and the ticket is not spent.
func TestUnavailableIsTypedAndRetryable(t *testing.T) {
	down := &flakyStore{err: errors.New("connection refused")}
	iss, _ := NewIssuer(IssuerConfig{Secret: secret})
	ver, _ := NewVerifier(VerifierConfig{Secret: secret, Spent: down})
	tk, _ := iss.Issue(IssueRequest{SandboxID: "s", Kind: KindApp, Subject: "alice"})
	want := Expect{SandboxID: "s", Kind: KindApp}
	_, err := ver.Verify(tk.Token, want)
	var te *Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) || !te.Retryable() || te.Reason != ReasonUnavailable {
		t.Fatalf("want a retryable unavailable refusal, got %v", err)
	}
	if !errors.Is(err, down.err) {
		t.Fatalf("the cause is lost: %v", err)
	}
	if (&Error{Reason: ReasonReplayed}).Retryable() || errors.Is(&Error{Reason: ReasonReplayed}, ErrUnavailable) {
		t.Fatal("a replay must not look retryable")
	}
	down.err = nil
	if _, err := ver.Verify(tk.Token, want); err != nil {
		t.Fatalf("the same ticket once the store answers: %v", err)
	}
}

// flakyStore is a SpentStore that fails while err is set and otherwise delegates to memory.
type flakyStore struct {
	err error
	mem *SpentNonces
}

func (f *flakyStore) Spend(ctx context.Context, nonce, subject string, exp time.Time, leeway time.Duration) error {
	if f.err != nil {
		return Unavailable(f.err)
	}
	if f.mem == nil {
		f.mem, _ = NewSpentNonces(10, nil)
	}
	return f.mem.Spend(ctx, nonce, subject, exp, leeway)
}
