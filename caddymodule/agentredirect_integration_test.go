package caddymodule_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// fakeAgentScript replaces a network none sandbox's agent, as tenant code can: it binds a socket of its own and
// renames it over the agent's, then answers every request with a 307 to argv[1] (file reads: argv[2]), and writes
// argv[3] once it serves.
const fakeAgentScript = `import os,socket,sys,threading
path='/run/sandgate/agent.sock'
s=socket.socket(socket.AF_UNIX)
tmp=path+'.x'
try: os.unlink(tmp)
except OSError: pass
s.bind(tmp); s.listen(64); os.rename(tmp,path)
open(sys.argv[3],'w').write('ready')
def serve(c):
    try:
        data=b''
        while b'\r\n\r\n' not in data:
            d=c.recv(65536)
            if not d: return
            data+=d
        to=sys.argv[2] if b' /v1/files' in data.split(b'\r\n')[0] else sys.argv[1]
        c.sendall(b'HTTP/1.1 307 Temporary Redirect\r\nLocation: '+to.encode()+b'\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
    finally:
        c.close()
while True:
    c,_=s.accept()
    threading.Thread(target=serve,args=(c,),daemon=True).start()
`

// TestReplacedAgentCannotRedirectTheGateway is issue 33's High 2 on the real engine: tenant code in a network
// none sandbox replaces the agent's socket with a server that answers 307 to a loopback listener (exec) and to a
// UNIX socket on the host (file reads, as the Docker socket would be named). Through the REST API, every call that
// reaches the fake agent answers ship_error (502) and the host listeners see no request.
func TestReplacedAgentCannotRedirectTheGateway(t *testing.T) {
	e := startEdgeWith(t, `	sandbox_api {
		key sk-none tester
	}`, fmt.Sprintf(`
		profile sealed {
			image %s
			memory 256m
			network none
			capabilities shell filesystem
		}`, testenv.Image(t, "base")))

	var hits atomic.Int32
	victim := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "another tenant's files")
	})
	loop := httptest.NewServer(victim)
	t.Cleanup(loop.Close)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hostSock := &http.Server{Handler: victim}
	go hostSock.Serve(ln)
	t.Cleanup(func() { hostSock.Close() })
	sockURL, _ := agentapi.BaseURL(agentapi.UnixAddr(sock), &http.Client{Transport: &agentapi.SocketTransport{}})

	api := func(method, path string, body any) (int, string) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequest(method, e.base+path, rd)
		req.Header.Set("Authorization", "Bearer sk-none")
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	code, body := api(http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "sealed"})
	if code/100 != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sb)
	id := sb.ID

	// The tenant writes its agent and starts it, detached, through the real agent.
	script := base64.StdEncoding.EncodeToString([]byte(fakeAgentScript))
	cmd := fmt.Sprintf(`python3 -c "import base64;open('/tmp/fake.py','wb').write(base64.b64decode('%s'))" && `+
		`setsid python3 /tmp/fake.py '%s' '%s' /tmp/fake.ready >/tmp/fake.log 2>&1 </dev/null & echo started`,
		script, loop.URL+"/v1/exec", sockURL+"/containers/other/archive?path=/workspace")
	if code, body := api(http.MethodPost, "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": cmd, "timeout": 60}); code != http.StatusOK || !strings.Contains(body, "started") {
		t.Fatalf("starting the fake agent: %d %s", code, body)
	}
	ctr := e.containerOf(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testenv.Poll(ctx, func(context.Context) (bool, error) {
		return exec.Command("docker", "exec", ctr, "test", "-f", "/tmp/fake.ready").Run() == nil, nil
	}); err != nil {
		out, _ := exec.Command("docker", "exec", ctr, "cat", "/tmp/fake.log").CombinedOutput()
		t.Fatalf("the fake agent did not start: %v\n%s", err, out)
	}

	// Connections the gateway kept to the real agent still reach it; every new one reaches the fake. Concurrent
	// calls open new ones: ask until both kinds of call have met the fake.
	var mu sync.Mutex
	refused := map[string]int{}
	if err := testenv.Poll(ctx, func(context.Context) (bool, error) {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				kind, code, body := "exec", 0, ""
				if i%2 == 0 {
					code, body = api(http.MethodPost, "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "echo real", "timeout": 30})
				} else {
					kind = "read"
					code, body = api(http.MethodGet, "/v1/sandboxes/"+id+"/filesystem/files?path=f.txt", nil)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case strings.Contains(body, "another tenant"):
					t.Errorf("%s answered the host listener's body: %d %s", kind, code, body)
				case code == http.StatusBadGateway && strings.Contains(body, "ship_error"):
					refused[kind]++
				case code == http.StatusOK || (kind == "read" && code == http.StatusNotFound):
					// a kept connection to the real agent
				default:
					t.Errorf("%s: %d %s; want ship_error (502), or the real agent's answer", kind, code, body)
				}
			}(i)
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return refused["exec"] > 0 && refused["read"] > 0, nil
	}); err != nil {
		t.Fatalf("the calls never met the fake agent (refused %v): %v", refused, err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host listeners got %d requests", n)
	}
}
