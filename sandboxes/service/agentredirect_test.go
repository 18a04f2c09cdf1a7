package service

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/agentapi/agentapitest"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// countingListener is a host service a replaced agent wants the gateway to reach: a loopback port, or a UNIX
// socket of the host (the Docker socket, spelt as the agent transport spells sockets).
func countingListener(t *testing.T, network string) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = &atomic.Int32{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "another tenant's files")
	})
	if network == "tcp" {
		return "http://" + agentapitest.ServeTCP(t, h) + "/containers/other/archive?path=/workspace", hits
	}
	sock := agentapitest.ServeUnix(t, "docker.sock", h)
	// The pooled transport's own spelling of a socket: what a redirect to the Docker socket would say.
	base, _ := agentapi.BaseURL(agentapi.UnixAddr(sock), &http.Client{Transport: &agentapi.SocketTransport{}})
	return base + "/containers/other/archive?path=/workspace", hits
}

// redirectAgent is a replaced agent on a UNIX socket (as in a network none sandbox) or loopback TCP that answers
// everything but the readiness probe with status to location (it was healthy when its sandbox started).
func redirectAgent(t *testing.T, overSocket bool, status int, location string) string {
	t.Helper()
	h := agentapitest.Healthy(agentapitest.Redirect(status, location))
	if !overSocket {
		return agentapitest.ServeTCP(t, h)
	}
	return agentapi.UnixAddr(agentapitest.ServeUnix(t, "agent.sock", h))
}

// TestAgentRedirectIsRefused performs issue 33's High 2 through the service, on the Manager's kind of agent
// transport: a replaced agent answers 302 or 307 naming a host socket or a loopback listener; every operation fails
// with ship_error (the agent's bad_reply), and the listener sees no request (a 307 replays no exec or upload body).
func TestAgentRedirectIsRefused(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	var id string // the sandbox of the current round
	ops := map[string]func(*Service) error{
		"exec": func(s *Service) error {
			_, err := s.RunShell(ctx, alice, id, ShellParams{Command: "id", Timeout: 5 * time.Second}, ExecMeta{})
			return err
		},
		"read file": func(s *Service) error { _, err := s.ReadFile(ctx, alice, id, "f.txt"); return err },
		"download": func(s *Service) error {
			d, err := s.DownloadFile(ctx, alice, id, "f.txt", "")
			if err == nil {
				d.Body.Close()
			}
			return err
		},
		"list": func(s *Service) error { _, err := s.ListDir(ctx, alice, id, "."); return err },
		"upload": func(s *Service) error {
			_, err := s.Upload(ctx, alice, id, "up.txt", strings.NewReader("body"))
			return err
		},
		"remove": func(s *Service) error { return s.RemoveFile(ctx, alice, id, "f.txt") },
	}
	for _, network := range []string{"unix", "tcp"} {
		for _, overSocket := range []bool{true, false} {
			for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
				to, hits := countingListener(t, network)
				sbs, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img",
					Capabilities: []string{sandboxes.CapShell, sandboxes.CapFilesystem}}}})
				engine.AgentAddr = redirectAgent(t, overSocket, status, to)
				sb, err := sbs.Create(ctx, sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
				if err != nil {
					t.Fatal(err)
				}
				id = sb.ID

				// The Manager's transport, under a client with Go's default redirect policy: the fix must not
				// depend on every caller remembering NoRedirect.
				tr := agentapi.NewSocketTransport(&http.Transport{})
				t.Cleanup(tr.CloseIdleConnections)
				svc := New(Config{Sandboxes: sbs, Agent: NewAgentClient(&http.Client{Transport: tr}), MaxUploadBytes: 1 << 20})
				for name, op := range ops {
					err := op(svc)
					var ae *agentapi.Error
					if e := AsError(err); e.Code != CodeShipError || !errors.As(err, &ae) || ae.Code != agentapi.CodeBadReply {
						t.Errorf("%s redirect %d over socket=%v, %s: %v; want ship_error from bad_reply", network, status, overSocket, name, err)
					}
				}
				if n := hits.Load(); n != 0 {
					t.Errorf("%s redirect %d over socket=%v: the host listener got %d requests", network, status, overSocket, n)
				}
			}
		}
	}
}

// A read of a file the agent answers without end is payload_too_large after maxReadFile bytes, not an unbounded
// buffer.
func TestReadFileOfEndlessAnswerIsBounded(t *testing.T) {
	target := agentMux(t, func() *http.ServeMux {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/files", func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 64<<10)
			for sent := 0; sent < 4*maxReadFile; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		return mux
	}())
	_, err := NewAgentClient(nil).ReadFile(context.Background(), target, "big")
	if e := AsError(err); e.Code != CodePayloadTooLarge {
		t.Fatalf("read: %v; want payload_too_large", err)
	}
}
