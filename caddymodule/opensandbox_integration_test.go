package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// osbReport is what testdata/opensandbox_sdk.cjs prints.
type osbReport struct {
	ID           string   `json:"id"`
	CreateStates []string `json:"createStates"`
	Info         struct {
		Image      string            `json:"image"`
		Entrypoint []string          `json:"entrypoint"`
		Metadata   map[string]string `json:"metadata"`
		ExpiresAt  string            `json:"expiresAt"`
	} `json:"info"`
	Listed       []string          `json:"listed"`
	ListedOther  int               `json:"listedOther"`
	Patched      map[string]string `json:"patched"`
	Endpoint1318 string            `json:"endpoint1318"`
	ExecStatus   int               `json:"execStatus"`
	App          struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"app"`
	BareNoKey    int    `json:"bareNoKey"`
	BareOwnerKey int    `json:"bareOwnerKey"`
	BareOtherKey int    `json:"bareOtherKey"`
	OtherListed  int    `json:"otherListed"`
	OtherGet     string `json:"otherGet"`
	OtherKill    string `json:"otherKill"`
	Renewed      struct {
		Before string `json:"before"`
		After  string `json:"after"`
	} `json:"renewed"`
	AfterPause    string   `json:"afterPause"`
	ResumeStates  []string `json:"resumeStates"`
	ResumeRunning string   `json:"resumeRunning"`
	WrongKey      string   `json:"wrongKey"`
	AfterKill     string   `json:"afterKill"`
	Execd         struct {
		OK          bool       `json:"ok"`
		TimeoutExit int        `json:"timeoutExit"`
		Stream      []string   `json:"stream"`
		Missing     sdkFailure `json:"missing"`
		MissingRead sdkFailure `json:"missingRead"`
		Outside     sdkFailure `json:"outside"`
		Deleted     sdkFailure `json:"deleted"`
	} `json:"execd"`
	Fatal string `json:"fatal"`
}

// sdkFailure is a call the script expected to fail: the SDK's error code, and the HTTP status where it has one.
type sdkFailure struct {
	Code   string `json:"code"`
	Status int    `json:"status"`
}

const (
	osbKeyAlice = "osb-test-key-alice-0123456789"
	osbKeyBob   = "osb-test-key-bob-0123456789"
)

// TestOpenSandboxSDK drives the dialect with OpenSandbox's real npm SDK against the real gateway binary and real
// containers: FastGPT's create body, list by metadata, endpoints through the proxy to a server in the sandbox,
// renew, pause, resume and kill with the states OpenSandbox reports, another owner kept out, a wrong key refused;
// then commands.run/runStream and every file and directory call through the proxy to the agent's execd API.
func TestOpenSandboxSDK(t *testing.T) {
	mods := testenv.NodeModules(t)
	ns := testenv.Unique("sgosb")
	testenv.RemoveNamespace(t, ns)
	bayPort, osbPort := testenv.FreePort(t), testenv.FreePort(t)
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		profile base {
			image %s
			cpus 0.5
			memory 512m
			pids 256
			capabilities shell python filesystem
			idle_timeout 10m
		}
	}
}

http://127.0.0.1:%d {
	sandbox_api {
		key %s alice
		key %s bob
	}
}

http://127.0.0.1:%d {
	sandbox_opensandbox
}
`, ns, testenv.Image(t, "base"), bayPort, osbKeyAlice, osbKeyBob, osbPort)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{})
	_ = g
	if err := testenv.WaitHTTP(t.Context(), fmt.Sprintf("http://127.0.0.1:%d/health", osbPort), testenv.WaitLimit); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunNode(t, filepath.Join("testdata", "opensandbox_sdk.cjs"),
		"OSB_DOMAIN="+fmt.Sprintf("http://127.0.0.1:%d", osbPort), "OSB_KEY="+osbKeyAlice, "OSB_OTHER_KEY="+osbKeyBob,
		"OSB_IMAGE="+testenv.Image(t, "base"), "BAY_URL="+fmt.Sprintf("http://127.0.0.1:%d", bayPort), "NODE_PATH="+mods)
	line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	var rep osbReport
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(line)), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: report %s", what, line)
		}
	}
	check("create reports Pending, then Running", len(rep.CreateStates) >= 1 && rep.CreateStates[len(rep.CreateStates)-1] == "Running" &&
		!slices.ContainsFunc(rep.CreateStates, func(s string) bool { return s != "Pending" && s != "Running" }))
	check("info echoes image and entrypoint", rep.Info.Image == testenv.Image(t, "base") && slices.Equal(rep.Info.Entrypoint, []string{"/home/sandbox/entrypoint.sh"}))
	check("metadata", rep.Info.Metadata["sessionId"] == "sess-1" && len(rep.Info.Metadata) == 1)
	check("list by sessionId", slices.Equal(rep.Listed, []string{rep.ID}) && rep.ListedOther == 0)
	check("patch", rep.Patched["team"] == "a" && rep.Patched["sessionId"] == "sess-1")
	check("endpoint 1318 is the gateway's proxy with a key", strings.HasPrefix(rep.Endpoint1318, fmt.Sprintf("http://127.0.0.1:%d/sandboxes/%s.", osbPort, rep.ID)) &&
		strings.HasSuffix(rep.Endpoint1318, "/proxy/1318"))
	check("a server in the sandbox answers through the endpoint", rep.ExecStatus == 200 && rep.App.Status == 200 && rep.App.Body == "hello-from-sandbox")
	check("the bare proxy path", rep.BareNoKey == 401 && rep.BareOwnerKey == 200 && rep.BareOtherKey == 404)
	check("another owner", rep.OtherListed == 0 && rep.OtherGet == "DOCKER::SANDBOX_NOT_FOUND" && rep.OtherKill == "DOCKER::SANDBOX_NOT_FOUND")
	before, _ := time.Parse(time.RFC3339, rep.Renewed.Before)
	after, _ := time.Parse(time.RFC3339, rep.Renewed.After)
	check("renew moves the expiry later", after.After(before))
	check("pause", rep.AfterPause == "Paused")
	check("resume", len(rep.ResumeStates) >= 1 && rep.ResumeStates[len(rep.ResumeStates)-1] == "Running")
	check("resume of a running sandbox", rep.ResumeRunning == "DOCKER::SANDBOX_NOT_PAUSED")
	check("wrong key", rep.WrongKey == "INVALID_API_KEY")
	check("kill", rep.AfterKill == "DOCKER::SANDBOX_NOT_FOUND")
	// execd's API through the dialect's proxy, with the SDK's own readiness check.
	check("execd commands and files through the gateway", rep.Execd.OK && rep.Execd.TimeoutExit != 0 && rep.Execd.TimeoutExit != 5)
	// stdout and stderr are separate pipes: their events may come in either order.
	mid := []string{}
	if n := len(rep.Execd.Stream); n >= 2 {
		mid = slices.Sorted(slices.Values(rep.Execd.Stream[1 : n-1]))
	}
	check("runStream", len(rep.Execd.Stream) >= 2 && rep.Execd.Stream[0] == "init" && rep.Execd.Stream[len(rep.Execd.Stream)-1] == "execution_complete" &&
		slices.Equal(mid, []string{"stderr:err", "stdout:streamed"}))
	check("missing paths are FILE_NOT_FOUND", rep.Execd.Missing.Code == "FILE_NOT_FOUND" && rep.Execd.Deleted.Code == "FILE_NOT_FOUND" &&
		rep.Execd.MissingRead.Status == 404)
	check("paths outside the workspace and home are refused", rep.Execd.Outside.Status == 403)
}

// TestOpenSandboxNetworkPolicyOnTheEgressProxy: on a profile whose sandboxes reach outside only through sandgate's
// egress proxy, an OpenSandbox networkPolicy becomes the sandbox's own rules there, inside the profile's allow-list.
// The servers are in a network namespace this test makes; denied names are refused before any DNS lookup.
func TestOpenSandboxNetworkPolicyOnTheEgressProxy(t *testing.T) {
	// The profile's network is sandgate's own internal one (a sandbox policy needs the proxy to be the only way
	// out); the rig makes it first, as the Manager would, to know its gateway address for the proxy URL.
	r := newEgressRig(t, "sgosbe", "-internal")
	image, allowed, other, ns, gw := r.image, r.allowed, r.other, r.ns, r.gw
	port, bayPort, osbPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	testenv.StartGateway(t, fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		gc_interval 1h
		profile egress {
			image %s
			memory 256m
			network internal
			egress_proxy http://%s:%d
			egress_allow %s pypi.org
		}
	}
}

http://:%d {
	sandbox_egress
}

http://127.0.0.1:%d {
	sandbox_api {
		key %s alice
	}
}

http://127.0.0.1:%d {
	sandbox_opensandbox
}
`, ns, image, gw, port, allowed, port, bayPort, osbKeyAlice, osbPort), testenv.GatewayOptions{})
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join("/run/sandgate", ns)) })
	base := fmt.Sprintf("http://127.0.0.1:%d", osbPort)
	if err := testenv.WaitHTTP(t.Context(), base+"/health", testenv.WaitLimit); err != nil {
		t.Fatal(err)
	}
	create := func(policy string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/sandboxes", strings.NewReader(`{"image":{"uri":"`+image+`"},"entrypoint":["tail","-f","/dev/null"],"timeout":600,"networkPolicy":`+policy+`}`))
		req.Header.Set("OPEN-SANDBOX-API-KEY", osbKeyAlice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("create with %s: %d %v", policy, resp.StatusCode, m)
		}
		id := m["id"].(string)
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			r, _ := http.NewRequest("GET", base+"/v1/sandboxes/"+id, nil)
			r.Header.Set("OPEN-SANDBOX-API-KEY", osbKeyAlice)
			resp, err := http.DefaultClient.Do(r)
			if err == nil {
				var sb osbSandbox
				_ = json.NewDecoder(resp.Body).Decode(&sb)
				resp.Body.Close()
				if sb.Status.State == "Running" {
					return id
				}
				if sb.Status.State == "Failed" {
					t.Fatalf("sandbox failed: %+v", sb)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s never Running", id)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	fetch := func(id, url string) string {
		out, _ := exec.Command("docker", "exec", ns+"-"+id, "python3", "-c", fetchScript, url).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	// Default allow with a deny of a name: the profile's destination stays reachable, the denied name is refused.
	open := create(`{"defaultAction":"allow","egress":[{"action":"deny","target":"blocked.test"},{"action":"deny","target":"host.docker.internal"}]}`)
	if got := fetch(open, "http://"+allowed+":8080/"); got != "200 hello from "+allowed {
		t.Fatalf("default allow, the profile's destination: %q", got)
	}
	if got := fetch(open, "http://blocked.test:8080/"); !strings.HasPrefix(got, "403 ") {
		t.Fatalf("default allow, a denied name: %q", got)
	}
	if got := fetch(open, "http://"+other+":8080/"); !strings.HasPrefix(got, "403 ") {
		t.Fatalf("default allow widened the profile's list: %q", got)
	}
	// Default deny with an allow of another name: the profile's destination is closed for this sandbox only.
	closed := create(`{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}`)
	if got := fetch(closed, "http://"+allowed+":8080/"); !strings.HasPrefix(got, "403 ") {
		t.Fatalf("default deny reached the profile's destination: %q", got)
	}
	if got := fetch(open, "http://"+allowed+":8080/"); got != "200 hello from "+allowed {
		t.Fatalf("another sandbox's policy changed this one's: %q", got)
	}
}

// osbSandbox is the part of OpenSandbox's sandbox the tests read.
type osbSandbox struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}
