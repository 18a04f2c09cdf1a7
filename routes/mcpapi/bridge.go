package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BridgeConfig is what the stdio bridge (`caddy sandgate-mcp`) needs.
type BridgeConfig struct {
	// URL is the gateway's MCP endpoint (https://gw.example.com/mcp).
	URL string
	// Key is the API key sent as a bearer token.
	Key string
	// In and Out carry newline-delimited JSON-RPC (the MCP stdio transport).
	In  io.Reader
	Out io.Writer
	// HTTPClient reaches the gateway; nil uses http.DefaultTransport.
	HTTPClient *http.Client
}

// bearer adds the API key to every request of the bridge.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// Bridge relays MCP messages between stdio and the gateway's Streamable HTTP endpoint until either side ends. It
// relays messages, not sessions: the client on stdio runs the MCP handshake itself. A call the gateway refuses
// (a wrong key, a network failure) is answered on stdio with a JSON-RPC error, so the client reports it instead
// of waiting forever.
func Bridge(ctx context.Context, cfg BridgeConfig) error {
	if cfg.URL == "" || cfg.Key == "" {
		return errors.New("the gateway URL and an API key are required")
	}
	base := http.DefaultTransport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	remoteT := &mcp.StreamableClientTransport{
		Endpoint:   cfg.URL,
		HTTPClient: &http.Client{Transport: bearer{key: cfg.Key, next: base}},
		// The bridge bypasses the SDK's client session, which is what opens the standalone stream after the
		// handshake; replies and progress come on each call's own stream.
		DisableStandaloneSSE: true,
	}
	remote, err := remoteT.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.URL, err)
	}
	defer remote.Close()
	local, err := (&mcp.IOTransport{Reader: io.NopCloser(cfg.In), Writer: nopWriteCloser{cfg.Out}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("opening stdio: %w", err)
	}
	defer local.Close()

	var (
		writeMu sync.Mutex // one writer on stdio at a time
		errOnce sync.Once
		first   error
	)
	stop := func(err error) {
		errOnce.Do(func() { first = err })
		cancel()
	}
	toLocal := func(msg jsonrpc.Message) error {
		writeMu.Lock()
		defer writeMu.Unlock()
		return local.Write(ctx, msg)
	}
	go func() {
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				stop(nil) // the gateway ended the session, or we are shutting down
				return
			}
			if err := toLocal(msg); err != nil {
				stop(fmt.Errorf("writing to stdout: %w", err))
				return
			}
		}
	}()
	var calls sync.WaitGroup
	for {
		msg, err := local.Read(ctx)
		if err != nil {
			calls.Wait()
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				stop(nil)
			} else {
				stop(fmt.Errorf("reading stdin: %w", err))
			}
			return first
		}
		req, isCall := msg.(*jsonrpc.Request)
		if !isCall || !req.IsCall() || req.Method == "initialize" {
			// The handshake and notifications go in order; a call's answer may take long, so calls go in parallel.
			if err := remote.Write(ctx, msg); err != nil && isCall && req.IsCall() {
				_ = toLocal(refusal(req, err))
			}
			continue
		}
		calls.Add(1)
		go func() {
			defer calls.Done()
			if err := remote.Write(ctx, req); err != nil {
				_ = toLocal(refusal(req, err))
			}
		}()
	}
}

// refusal answers a call the gateway did not take.
func refusal(req *jsonrpc.Request, err error) *jsonrpc.Response {
	msg := err.Error()
	if strings.Contains(msg, "401") || strings.Contains(msg, "Unauthorized") {
		msg = "the gateway refused the API key: " + msg
	}
	return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
