package bayapi

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sandgate/sandgate/sandboxes/service"
)

func TestFilesExportImport(t *testing.T) {
	a := newTestAPI(t)
	src := a.create(t, keyAlice, map[string]any{"profile": "python-default"})
	dst := a.create(t, keyAlice, map[string]any{"profile": "python-default"})
	bobs := a.create(t, keyBob, map[string]any{"profile": "python-default"})
	payload := []byte{0, 1, 2, 255, 'x', '\n'}
	a.agent.mu.Lock()
	a.agent.files["out/data.bin"] = payload
	a.agent.files["secret.txt"] = []byte("not exported")
	a.agent.mu.Unlock()

	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+src+"/files:export", keyAlice, map[string]any{"paths": []string{"./out/data.bin"}})
	if st != 200 {
		t.Fatalf("export: %d %v", st, out)
	}
	if st, out, _ = a.call(t, "GET", "/v1/sandboxes/"+src+"/files:export", keyAlice, nil); st != 200 || len(out["exports"].([]any)) != 1 {
		t.Fatalf("list exports: %d %v", st, out)
	}

	st, out, _ = a.call(t, "POST", "/v1/sandboxes/"+dst+"/files:import", keyAlice,
		map[string]any{"from_sandbox": src, "path": "out/data.bin", "destination": "in/copy.bin"})
	if st != 200 || out["size"].(float64) != float64(len(payload)) || out["path"] != "in/copy.bin" {
		t.Fatalf("import: %d %v", st, out)
	}
	a.agent.mu.Lock()
	got := a.agent.files["in/copy.bin"]
	a.agent.mu.Unlock()
	if !bytes.Equal(got, payload) {
		t.Fatalf("copied %v, want %v", got, payload)
	}

	for _, tc := range []struct {
		name, target, key string
		body              map[string]any
		status            int
		code              string
	}{
		{"not exported", dst, keyAlice, map[string]any{"from_sandbox": src, "path": "secret.txt"}, 403, service.CodeForbidden},
		{"other owner's source", bobs, keyBob, map[string]any{"from_sandbox": src, "path": "out/data.bin"}, 404, service.CodeNotFound},
		{"other owner's destination", bobs, keyAlice, map[string]any{"from_sandbox": src, "path": "out/data.bin"}, 404, service.CodeNotFound},
		{"path escapes", dst, keyAlice, map[string]any{"from_sandbox": src, "path": "../etc/passwd"}, 400, service.CodeInvalidPath},
		{"both sources", dst, keyAlice, map[string]any{"from_sandbox": src, "path": "out/data.bin", "url": "https://example.com/x"}, 400, service.CodeValidation},
		{"neither", dst, keyAlice, map[string]any{"destination": "x"}, 400, service.CodeValidation},
		{"loopback url", dst, keyAlice, map[string]any{"url": "http://127.0.0.1:1/x"}, 403, service.CodeForbidden},
		{"metadata url", dst, keyAlice, map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}, 403, service.CodeForbidden},
		{"file url", dst, keyAlice, map[string]any{"url": "file:///etc/passwd"}, 400, service.CodeValidation},
		{"unknown field", dst, keyAlice, map[string]any{"from": src}, 400, service.CodeValidation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+tc.target+"/files:import", tc.key, tc.body)
			if st != tc.status || errCode(out) != tc.code {
				t.Fatalf("%d %v, want %d %s", st, out, tc.status, tc.code)
			}
		})
	}
	// Exporting someone else's sandbox is refused the same way.
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+src+"/files:export", keyBob, map[string]any{"paths": []string{"x"}}); st != 404 {
		t.Fatalf("bob exporting alice's: %d %v", st, out)
	}
}

func TestCreateWithDependencies(t *testing.T) {
	a := newTestAPI(t)
	st, out, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"profile": "python-default",
		"dependencies": map[string]any{"python": map[string]string{"requests": "2.31.0"}, "node": map[string]string{"lodash": "^4"}}})
	if st != 201 {
		t.Fatalf("create: %d %v", st, out)
	}
	st, out, _ = a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"profile": "python-default",
		"dependencies": map[string]any{"r": map[string]string{"R6": ">=2.5", "data.table": ""}}})
	if st != 201 {
		t.Fatalf("create with r dependencies: %d %v", st, out)
	}
	for name, deps := range map[string]any{
		"bad name":      map[string]any{"python": map[string]string{"--extra-index-url=http://x": ""}},
		"r code":        map[string]any{"r": map[string]string{"x');system('id": ""}},
		"r bad version": map[string]any{"r": map[string]string{"R6": "latest"}},
		"apt":           map[string]any{"apt": []string{"curl"}},
		"shape":         "numpy",
	} {
		st, out, _ := a.call(t, "POST", "/v1/sandboxes", keyAlice, map[string]any{"profile": "python-default", "dependencies": deps})
		if st != 422 && st != 400 {
			t.Fatalf("%s: %d %v", name, st, out)
		}
	}
}

func TestNodeExecNeedsTheCapability(t *testing.T) {
	a := newTestAPI(t)
	id := a.create(t, keyAlice, map[string]any{"profile": "python-default"})
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/node/exec", keyAlice, map[string]any{"code": "1+1"})
	if st != 400 || errCode(out) != service.CodeCapability {
		t.Fatalf("%d %v", st, out)
	}
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/node/exec", keyAlice, map[string]any{"timeout": 5}); st != 422 && st != 400 {
		t.Fatalf("missing code: %d %v", st, out)
	}
}

// TestImportURLSSRFSpellings: files:import with every spelling of loopback, unspecified and link-local (IPv6 zones,
// 4-in-6, NAT64, 6to4, decimal) is refused, and the gateway-side listener the attack aims at sees no request. The
// victim's workspace is untouched.
func TestImportURLSSRFSpellings(t *testing.T) {
	var hits atomic.Int32
	srv4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("gateway-only secret"))
	})}
	go target.Serve(srv4)
	defer target.Close()
	p4 := strconv.Itoa(srv4.Addr().(*net.TCPAddr).Port)
	p6 := p4
	if ln6, err := net.Listen("tcp", "[::]:0"); err == nil {
		go target.Serve(ln6)
		p6 = strconv.Itoa(ln6.Addr().(*net.TCPAddr).Port)
	}
	lo := "lo"
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback != 0 {
				lo = i.Name
			}
		}
	}
	a := newTestAPI(t)
	dst := a.create(t, keyAlice, map[string]any{"profile": "python-default"})
	for _, u := range []string{
		"http://[::1%25" + lo + "]:" + p6 + "/x",
		"http://[::%25" + lo + "]:" + p6 + "/x",
		"http://[::]:" + p6 + "/x",
		"http://[fe80::1%25" + lo + "]:" + p6 + "/x",
		"http://[::ffff:127.0.0.1]:" + p4 + "/x",
		"http://[::ffff:7f00:1]:" + p4 + "/x",
		"http://[64:ff9b::127.0.0.1]:" + p4 + "/x",
		"http://[2002:7f00:1::1]:" + p4 + "/x",
		"http://0.0.0.0:" + p4 + "/x",
		"http://127.1:" + p4 + "/x",
		"http://2130706433:" + p4 + "/x",
		"http://0x7f.0.0.1:" + p4 + "/x",
		"http://localhost:" + p4 + "/x",
		"http://[fd00:ec2::254]/latest/meta-data/",
	} {
		t.Run(u, func(t *testing.T) {
			st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+dst+"/files:import", keyAlice,
				map[string]any{"url": u, "destination": "stolen.txt"})
			if st == 200 {
				t.Fatalf("import of %s succeeded: %v", u, out)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the gateway-side listener served %d requests", n)
	}
	a.agent.mu.Lock()
	_, stolen := a.agent.files["stolen.txt"]
	a.agent.mu.Unlock()
	if stolen {
		t.Fatal("a file was written from a refused URL")
	}
}
