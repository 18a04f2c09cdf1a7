package fastgpt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// The FastGPT main-service endpoints the proxy calls.
const (
	verifyTicketPath = "/api/core/ai/sandbox/verifyTicket"
	keepalivePath    = "/api/core/ai/sandbox/keepalive"

	headerProxyToken     = "X-Proxy-Token"
	headerSandboxTicket  = "X-Sandbox-Ticket"
	headerPreviewSession = "X-Sandbox-Preview-Session"
)

// appClient talks to the FastGPT main service.
type appClient struct {
	base   string
	secret string
	http   *http.Client
}

func newAppClient(cfg *Config) *appClient {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: cfg.RequestTimeout, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 32,
	}
	return &appClient{base: cfg.AppURL, secret: cfg.Secret, http: &http.Client{Timeout: cfg.RequestTimeout, Transport: tr}}
}

// sandboxAddress is verifyTicket's data: where the IDE agent is and how to talk to it.
type sandboxAddress struct {
	SandboxURL string   `json:"sandbox_url"`
	AgentToken string   `json:"agent_token"`
	WSLimits   wsLimits `json:"ws_limits"`
}

type wsLimits struct {
	MaxMessageBytes int64 `json:"max_message_bytes"`
	MaxFrameBytes   int64 `json:"max_frame_bytes"`
}

func (l wsLimits) withDefaults() wsLimits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = defaultMaxMessageBytes
	}
	if l.MaxFrameBytes <= 0 {
		l.MaxFrameBytes = defaultMaxFrameBytes
	}
	return l
}

// envelope is FastGPT's jsonRes shape.
type envelope struct {
	Code       *int            `json:"code"`
	StatusText string          `json:"statusText"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data"`
}

// statusError is a non-2xx answer of the main service.
type statusError struct{ status int }

func (e *statusError) Error() string { return fmt.Sprintf("FastGPT answered HTTP %d", e.status) }

func (e *statusError) clientError() bool { return e.status >= 400 && e.status < 500 }

// resolve asks verifyTicket for a sandbox address; header is X-Sandbox-Ticket or X-Sandbox-Preview-Session.
func (a *appClient) resolve(ctx context.Context, header, credential string) (*sandboxAddress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+verifyTicketPath, nil)
	if err != nil {
		return nil, fmt.Errorf("building verifyTicket request: %w", err)
	}
	req.Header.Set(header, credential)
	req.Header.Set(headerProxyToken, a.secret)
	req.Header.Set("Accept", "application/json")
	data, err := a.do(req)
	if err != nil {
		return nil, fmt.Errorf("verifyTicket: %w", err)
	}
	addr := new(sandboxAddress)
	if len(data) > 0 && !bytes.Equal(data, []byte("null")) {
		if err := json.Unmarshal(data, addr); err != nil {
			return nil, fmt.Errorf("verifyTicket: decoding data: %w", err)
		}
	}
	addr.WSLimits = addr.WSLimits.withDefaults()
	return addr, nil
}

// keepalive refreshes the sandbox's activity in FastGPT.
func (a *appClient) keepalive(ctx context.Context, claims *Claims) error {
	body, err := json.Marshal(claims.keepaliveBody())
	if err != nil {
		return fmt.Errorf("encoding keepalive body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+keepalivePath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building keepalive request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerProxyToken, a.secret)
	if _, err := a.do(req); err != nil {
		return fmt.Errorf("keepalive: %w", err)
	}
	return nil
}

// do sends req and returns the envelope's data when the HTTP status is 2xx and the envelope's code is 200.
func (a *appClient) do(req *http.Request) (json.RawMessage, error) {
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &statusError{status: resp.StatusCode}
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("decoding response envelope: %w", err)
	}
	if env.Code == nil || *env.Code != 200 {
		code := 0
		if env.Code != nil {
			code = *env.Code
		}
		return nil, fmt.Errorf("%w: code %d", errEnvelopeCode, code)
	}
	return env.Data, nil
}

var errEnvelopeCode = errors.New("FastGPT answered a non-200 code")
