package bayapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// bayProfiles are Bay's two profiles.
var bayProfiles = []sandboxes.Profile{
	{ID: "python-default", Image: "sandgate/sandbox:base", Capabilities: []string{"filesystem", "shell", "python"},
		Resources: sandboxes.Resources{CPUs: 1, Memory: "1g"}, IdleTimeout: sandboxes.Duration(30 * time.Minute)},
	{ID: "browser-python", Image: "sandgate/sandbox:browser", Capabilities: []string{"filesystem", "shell", "python", "browser"}},
}

// lifecycleOnly is the real Manager seen through service.Sandboxes alone, without pause, snapshots, the collector
// or the other optional surfaces: the backend Bay's unit tests run on unless they ask for the whole Manager
// (TestLifecycleOpsWithoutBackend pins its answers).
type lifecycleOnly struct{ service.Sandboxes }

// fakeAgent keeps a workspace in memory and runs a few shell commands.
type fakeAgent struct {
	mu       sync.Mutex
	files    map[string][]byte
	lastExec service.ExecRequest
	pyCount  int
	browser  []service.BrowserRequest
	pageText string // what "get text" reads ("text" when empty)
	nexec    int    // shell and python calls
}

// execs is how many shell and python calls reached the agent.
func (a *fakeAgent) execs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nexec
}

func newFakeAgent() *fakeAgent { return &fakeAgent{files: map[string][]byte{}} }

func (a *fakeAgent) Exec(_ context.Context, _ sandboxes.Target, req service.ExecRequest) (service.ExecResult, error) {
	a.mu.Lock()
	a.lastExec = req
	a.nexec++
	a.mu.Unlock()
	switch {
	case req.Command == "true":
		return service.ExecResult{}, nil
	case strings.HasPrefix(req.Command, "echo "):
		return service.ExecResult{Stdout: strings.TrimPrefix(req.Command, "echo ") + "\n"}, nil
	case req.Command == "sleep 999":
		return service.ExecResult{ExitCode: -1, TimedOut: true}, nil
	default:
		return service.ExecResult{ExitCode: 127, Stderr: "sh: " + req.Command + ": not found\n"}, nil
	}
}

func (a *fakeAgent) Python(_ context.Context, _ sandboxes.Target, req service.PythonRequest) (service.PythonResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nexec++
	a.pyCount++
	if strings.Contains(req.Code, "raise") {
		return service.PythonResult{Error: "Traceback: ValueError", ExecutionCount: a.pyCount}, nil
	}
	return service.PythonResult{Stdout: "hi\n", Result: "42", Images: []string{"iVBORw0KGgo="}, ExecutionCount: a.pyCount}, nil
}

func (a *fakeAgent) ReadFile(_ context.Context, _ sandboxes.Target, p string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.files[p]
	if !ok {
		return nil, agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	return b, nil
}

func (a *fakeAgent) WriteFile(_ context.Context, _ sandboxes.Target, p string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[p] = b
	return nil
}

func (a *fakeAgent) ListDir(_ context.Context, _ sandboxes.Target, p string) ([]service.DirEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []service.DirEntry
	for name, b := range a.files {
		if p == "." || strings.HasPrefix(name, p+"/") {
			out = append(out, service.DirEntry{Name: name[strings.LastIndex(name, "/")+1:], Path: name, IsFile: true, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (a *fakeAgent) Remove(_ context.Context, _ sandboxes.Target, p string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.files[p]; !ok {
		return agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	delete(a.files, p)
	return nil
}

func (a *fakeAgent) Upload(_ context.Context, _ sandboxes.Target, p string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[p] = b
	return int64(len(b)), nil
}

func (a *fakeAgent) Download(_ context.Context, _ sandboxes.Target, p, rng string) (*service.Download, error) {
	a.mu.Lock()
	b, ok := a.files[p]
	a.mu.Unlock()
	if !ok {
		return nil, agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	h := http.Header{}
	if rng != "" {
		var start, end int
		if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &start, &end); err != nil || end >= len(b) {
			return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "bad range")
		}
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(b)))
		return &service.Download{Body: io.NopCloser(bytes.NewReader(b[start : end+1])), Status: http.StatusPartialContent, Header: h}, nil
	}
	h.Set("Content-Length", fmt.Sprint(len(b)))
	return &service.Download{Body: io.NopCloser(bytes.NewReader(b)), Status: http.StatusOK, Header: h}, nil
}

func (a *fakeAgent) Browser(_ context.Context, _ sandboxes.Target, req service.BrowserRequest) (service.BrowserResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.browser = append(a.browser, req)
	switch req.Action {
	case "navigate":
		return service.BrowserResult{Value: req.URL}, nil
	case "title":
		return service.BrowserResult{Value: "Example Domain"}, nil
	case "screenshot":
		return service.BrowserResult{PNG: []byte("\x89PNG")}, nil
	case "evaluate":
		return service.BrowserResult{Value: "2"}, nil
	case "text":
		if a.pageText != "" {
			return service.BrowserResult{Value: a.pageText}, nil
		}
	}
	return service.BrowserResult{Value: "text"}, nil
}
