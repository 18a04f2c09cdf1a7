package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// osbFastGPTReport is what testdata/opensandbox_fastgpt.cjs prints.
type osbFastGPTReport struct {
	Images []struct {
		Image   string   `json:"image"`
		Profile string   `json:"profile"`
		ID      string   `json:"id"`
		States  []string `json:"states"`
		Run     struct {
			ExitCode int    `json:"exitCode"`
			Stdout   string `json:"stdout"`
		} `json:"run"`
		FailExit     int    `json:"failExit"`
		FailStderr   string `json:"failStderr"`
		TmpPwd       string `json:"tmpPwd"`
		Endpoint1318 string `json:"endpoint1318"`
	} `json:"images"`
	Fatal string `json:"fatal"`
}

const osbFastGPTSecret = "fastgpt-proxy-secret-0123456789abcdef-test"

// fastGPTStack is FastGPT's sandbox stack on one gateway, as the OpenSandbox tests run it: the OpenSandbox API,
// fastgpt_proxy in front of a stand-in of FastGPT's main service (its verifyTicket), and the Bay API for alice's key.
type fastGPTStack struct {
	gw *testenv.Gateway
	ns string
	// ours is our base image, theirs an image shaped like FastGPT's (testenv.FastGPTImage).
	ours, theirs string
	// osb is the OpenSandbox API's base URL; proxy is fastgpt_proxy's host:port.
	osb, proxy string
	app        *testenv.FastGPTApp
	mods       string
}

// fastGPTProfile is a profile as FastGPT's provider config writes one: our image, FastGPT's image admitted, 1 CPU,
// 1g, 256 pids, shell, python and files, and the extra option lines.
type fastGPTProfile struct {
	name  string
	extra []string
}

// startFastGPTStack starts the stack with profiles, on namespace prefix plus a unique suffix.
func startFastGPTStack(t *testing.T, prefix string, profiles ...fastGPTProfile) *fastGPTStack {
	t.Helper()
	s := &fastGPTStack{mods: testenv.NodeModules(t), ours: testenv.Image(t, "base"), theirs: testenv.FastGPTImage(t), ns: testenv.Unique(prefix)}
	var blocks strings.Builder
	for _, p := range profiles {
		var extra strings.Builder
		for _, line := range p.extra {
			extra.WriteString("\t\t\t" + line + "\n")
		}
		fmt.Fprintf(&blocks, `		profile %s {
			image %s
			cpus 1
			memory 1g
			pids 256
			capabilities shell python filesystem
			allowed_images %s
%s		}
`, p.name, s.ours, s.theirs, extra.String())
	}
	testenv.RemoveNamespace(t, s.ns)
	s.app = testenv.NewFastGPTApp(t, osbFastGPTSecret)
	bayPort, osbPort, fgPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		agent_image %s
%s	}
}

http://127.0.0.1:%d {
	sandbox_api {
		key %s alice
	}
}

http://127.0.0.1:%d {
	sandbox_opensandbox
}

http://127.0.0.1:%d {
	fastgpt_proxy {
		secret %s
		app_url %s
	}
}
`, s.ns, s.ours, blocks.String(), bayPort, osbKeyAlice, osbPort, fgPort, osbFastGPTSecret, s.app.URL)
	s.gw = testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{})
	s.osb, s.proxy = fmt.Sprintf("http://127.0.0.1:%d", osbPort), fmt.Sprintf("127.0.0.1:%d", fgPort)
	if err := testenv.WaitHTTP(t.Context(), s.osb+"/health", testenv.WaitLimit); err != nil {
		t.Fatal(err)
	}
	return s
}

// runSDK runs FastGPT's call sequence (testdata/opensandbox_fastgpt.cjs) through the npm SDK on images (a comma-separated
// list; "image|profile" names a profile) with env added, and returns its report, which must cover every image.
func (s *fastGPTStack) runSDK(t *testing.T, images string, env ...string) osbFastGPTReport {
	t.Helper()
	out, err := testenv.RunNode(t, filepath.Join("testdata", "opensandbox_fastgpt.cjs"),
		append([]string{"OSB_DOMAIN=" + s.osb, "OSB_KEY=" + osbKeyAlice, "OSB_IMAGES=" + images, "NODE_PATH=" + s.mods}, env...)...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep osbFastGPTReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" || len(rep.Images) != strings.Count(images, ",")+1 {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)
	return rep
}

// ide sends FastGPT's IDE protocol through fastgpt_proxy to the endpoint the SDK gave for port 1318, which
// verifyTicket hands back with password as FastGPT does: it writes path in the workspace and runs a command that
// reads it back and names its parent process, the IDE agent that answered.
func (s *fastGPTStack) ide(t *testing.T, endpoint1318, password, path string) string {
	t.Helper()
	s.app.Point(endpoint1318, password)
	return testenv.FastGPTIDE(t, s.proxy, osbFastGPTSecret, path, "cat /workspace/"+path+"; echo; tr '\\0' ' ' < /proc/$PPID/cmdline")
}

// TestOpenSandboxFastGPTImages is FastGPT's whole sandbox stack on one gateway: the real npm SDK sends FastGPT's
// create body (image, entrypoint, resourceLimits, env, metadata, the Docker egress networkPolicy) for our image
// and for an image shaped like FastGPT's (testenv.FastGPTImage: debian-slim, its own user, a shell entrypoint that
// writes the IDE password into HOME and sleeps), which runs with our agent injected because the profile's
// allowed_images admits it; that image is created twice, once under a profile whose agent serves FastGPT's IDE
// protocol (the default) and once under a profile that leaves it to the image's own IDE agent
// (SANDGATE_IDE_AGENT image). All answer commands.run; the FastGPT image's entrypoint ran as the sandbox user with
// HOME; the containers carry the limits asked; and on each of the three, FastGPT's IDE protocol reaches the IDE
// agent through fastgpt_proxy on the endpoint getEndpointUrl(1318) gave, which verifyTicket hands back as FastGPT
// does: the process that answers is ours or the image's, as the profile says. Limits above the profile's get the
// profile's.
func TestOpenSandboxFastGPTImages(t *testing.T) {
	s := startFastGPTStack(t, "sgosf", fastGPTProfile{name: "fastgpt"},
		fastGPTProfile{name: "fastgpt-image-ide", extra: []string{"env SANDGATE_IDE_AGENT image"}})
	ns, theirs, osb := s.ns, s.theirs, s.osb
	rep := s.runSDK(t, s.ours+","+theirs+","+theirs+"|fastgpt-image-ide")

	for i, im := range rep.Images {
		lines := strings.Split(im.Run.Stdout, "\n")
		if im.Run.ExitCode != 0 || len(lines) < 4 || lines[0] != "65532" || lines[1] != "/home/sandbox" ||
			lines[2] != fmt.Sprintf("sess-%d", i) || len(lines[3]) < 20 {
			t.Errorf("%s: commands.run %+v", im.Image, im.Run)
		}
		if im.FailExit != 3 || im.FailStderr != "oops" {
			t.Errorf("%s: a failing command: exit %d stderr %q", im.Image, im.FailExit, im.FailStderr)
		}
		if im.TmpPwd != "/tmp" {
			t.Errorf("%s: a command with workingDirectory /tmp ran in %q", im.Image, im.TmpPwd)
		}
		if !strings.HasPrefix(im.Endpoint1318, fmt.Sprintf("%s/sandboxes/%s.", osb, im.ID)) {
			t.Errorf("%s: endpoint %q", im.Image, im.Endpoint1318)
		}
		// The limits asked, not the profile's, on the real container.
		info := testenv.Inspect(t, testenv.ContainerOf(t, ns, im.ID))
		if info.HostConfig.NanoCPUs != 5e8 || info.HostConfig.Memory != 512<<20 || info.HostConfig.MemorySwap != 512<<20 {
			t.Errorf("%s: container limits cpus %d memory %d swap %d, want 0.5 CPU and 512Mi", im.Image,
				info.HostConfig.NanoCPUs, info.HostConfig.Memory, info.HostConfig.MemorySwap)
		}
		if i >= 1 {
			// FastGPT's image: its own entrypoint ran, as the sandbox user with the sandbox's HOME, and the agent
			// injected beside it serves exec.
			if len(lines) < 5 || lines[4] != "uid=65532 home=/home/sandbox" {
				t.Errorf("the FastGPT image's entrypoint did not run as expected: %q", im.Run.Stdout)
			}
			if info.Config.Image != theirs || !strings.HasPrefix(info.Path, "/opt/sandgate/") {
				t.Errorf("the FastGPT image runs %q with %q", info.Config.Image, info.Path)
			}
		}
	}

	// FastGPT's IDE protocol through fastgpt_proxy, relayed to the endpoint of port 1318, on each sandbox: the IDE
	// agent wrote (ours) or read (the image's, started after its entrypoint wrote it) the password the command read.
	// fs/exec's shell names its parent, the IDE agent that answered.
	answerers := []string{"/usr/local/bin/sandgate-agent", "/opt/sandgate/sandgate-agent supervise -- /home/sandbox/entrypoint.sh", "/usr/local/bin/fastgpt-ide-agent"}
	for i, im := range rep.Images {
		run := strings.Split(im.Run.Stdout, "\n")
		if len(run) < 4 {
			continue // reported above
		}
		got := s.ide(t, im.Endpoint1318, run[3], fmt.Sprintf("ide/hello-%d.txt", i))
		if want := "hello ide\n" + answerers[i] + " "; got != want {
			t.Errorf("%s (profile %q): fs/exec through the relay: %q, want %q", im.Image, im.Profile, got, want)
		}
	}

	// Limits above the profile's (the npm SDK's default asks 1 CPU and 2 GiB; this asks more) get the profile's.
	req, _ := http.NewRequest("POST", osb+"/v1/sandboxes", strings.NewReader(`{"image":{"uri":"`+theirs+`"},"entrypoint":["/home/sandbox/entrypoint.sh"],`+
		`"timeout":600,"resourceLimits":{"cpu":"4","memory":"8Gi"}}`))
	req.Header.Set("OPEN-SANDBOX-API-KEY", osbKeyAlice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created osbSandbox
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create above the cap: %d %+v", resp.StatusCode, created)
	}
	for deadline := time.Now().Add(testenv.WaitLimit); ; {
		r, _ := http.NewRequest("GET", osb+"/v1/sandboxes/"+created.ID, nil)
		r.Header.Set("OPEN-SANDBOX-API-KEY", osbKeyAlice)
		resp, err := http.DefaultClient.Do(r)
		var sb osbSandbox
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&sb)
			resp.Body.Close()
		}
		if sb.Status.State == "Running" {
			break
		}
		if sb.Status.State == "Failed" || time.Now().After(deadline) {
			t.Fatalf("sandbox %s: %+v", created.ID, sb)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if hc := testenv.Inspect(t, testenv.ContainerOf(t, ns, created.ID)).HostConfig; hc.NanoCPUs != 1e9 || hc.Memory != 1<<30 {
		t.Errorf("limits above the cap: cpus %d memory %d, want the profile's 1 CPU and 1g", hc.NanoCPUs, hc.Memory)
	}
}
