package opensandbox

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// fastGPTImageBody is FastGPT's create body with its own image, which only the anyimage profile's allowed_images
// admits.
var fastGPTImageBody = strings.Replace(fastGPTBody, `"uri":"sandgate/sandbox:base"`, `"uri":"fastgpt-agent-sandbox:v4.14"`, 1)

// TestCreateAnyImage: FastGPT's own image runs under the profile that allows it, with our agent injected: the
// entrypoint is the image's supervised child (no agent service), and cpu/memory become the sandbox's limits.
func TestCreateAnyImage(t *testing.T) {
	rg := newRig(t)
	resp, m := rg.do("POST", "/v1/sandboxes", keyAlice, fastGPTImageBody)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	c, env := rg.made(m["id"].(string))
	spec := rg.spec(c.ID)
	if c.Profile != "anyimage" || !spec.Profile.InjectsAgent() || spec.Image != "fastgpt-agent-sandbox:v4.14" ||
		!slices.Equal(spec.Profile.Entrypoint, []string{"/home/sandbox/entrypoint.sh"}) {
		t.Fatalf("core made %+v, container %+v", c, spec)
	}
	if _, ok := env[sandboxes.EnvServices]; ok {
		t.Errorf("the entrypoint also became an agent service: %v", env)
	}
	if spec.Profile.Resources != osbProfiles[4].Resources || env["IDE_AGENT_ENABLED"] != "true" { // the profile's own: 2 CPUs, 4g
		t.Errorf("resources %+v env %v", spec.Profile.Resources, env)
	}
	if _, got := rg.do("GET", "/v1/sandboxes/"+m["id"].(string), keyAlice, ""); got["image"] == nil ||
		got["image"].(map[string]any)["uri"] != "fastgpt-agent-sandbox:v4.14" {
		t.Errorf("read back %v", got)
	}
	// Our own image with limits: the same limits, and the entrypoint stays a service of our agent.
	own := rg.create(keyAlice, strings.Replace(fastGPTBody, `"cpu":"2","memory":"4096Mi"`, `"cpu":"500m","memory":"512Mi"`, 1))
	if _, env := rg.made(own); env[sandboxes.EnvServices] == "" {
		t.Errorf("own image: the entrypoint is no agent service: %v", env)
	}
	if spec := rg.spec(own); spec.Profile.InjectsAgent() || spec.Image != osbProfiles[0].Image ||
		spec.Profile.Resources != (sandboxes.Resources{CPUs: 0.5, Memory: "536870912"}) {
		t.Errorf("own image: %+v", spec)
	}
}

// TestCreateImageSpellingAttack: a tenant cannot reach an image off the allow-list by any spelling of a
// reference, and asking above the profile's limits gets the profile's.
func TestCreateImageSpellingAttack(t *testing.T) {
	rg := newRig(t)
	digest := "sha256:" + strings.Repeat("a", 64)
	refused := []string{
		"sandgate/sandbox:browser",                          // an image of ours no profile runs
		"fastgpt-agent-sandbox:v1@" + digest,                // an allowed tag in front of any image's digest
		"fastgpt-agent-sandbox@" + digest,                   // a digest, which no tag pattern admits
		"docker.io/library/evil:1",                          // the long form of an image off the list
		"docker.io/evil/fastgpt-agent-sandbox:1",            // another namespace
		"evil.example/fastgpt-agent-sandbox:1",              // another registry
		"fastgpt-agent-sandbox-evil:1",                      // a longer name
		"FASTGPT-agent-sandbox:1",                           // upper case is no reference
		"fastgpt-agent-sandbox:1/../evil",                   // traversal
		"registry.example/team/sub/x:1",                     // '*' stops at '/'
		strings.Repeat("a", 64),                             // an image ID
		"fastgpt-agent-sandbox:1 --privileged",              // whitespace
		"fastgpt-agent-sandbox:1\n",                         // control characters
		"registry.example/team/x:1@" + digest,               // tag and digest behind a team pattern
		"registry.example:443/team/x:1",                     // another host spelling is another registry
		"/fastgpt-agent-sandbox:1",                          // not a reference
		"fastgpt-agent-sandbox:" + strings.Repeat("v", 200), // a tag too long
	}
	for _, uri := range refused {
		body := strings.Replace(fastGPTBody, `"uri":"sandgate/sandbox:base"`, `"uri":`+quote(uri), 1)
		if resp, m := rg.do("POST", "/v1/sandboxes", keyAlice, body); resp.StatusCode != 400 || m["code"] != CodeImageNotSupported {
			t.Errorf("image %q: %d %v", uri, resp.StatusCode, m)
		}
	}
	rg.noneMade()
	// Spellings of allowed images are one image each, and the core is given the canonical one.
	for uri, want := range map[string]string{
		"docker.io/library/fastgpt-agent-sandbox:v2": "fastgpt-agent-sandbox:v2",
		"fastgpt-agent-sandbox":                      "fastgpt-agent-sandbox:latest",
		"registry.example/team/tool:1":               "registry.example/team/tool:1",
	} {
		body := strings.Replace(fastGPTBody, `"uri":"sandgate/sandbox:base"`, `"uri":`+quote(uri), 1)
		resp, m := rg.do("POST", "/v1/sandboxes", keyAlice, body)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("allowed %q: %d %v", uri, resp.StatusCode, m)
			continue
		}
		c, _ := rg.made(m["id"].(string))
		spec := rg.spec(c.ID)
		if !spec.Profile.InjectsAgent() || c.Profile != "anyimage" {
			t.Errorf("allowed %q: %+v", uri, c)
		}
		if spec.Image != want {
			t.Errorf("allowed %q runs %q, want %q", uri, spec.Image, want)
		}
	}
	// Above the profile's limits (the npm SDK's default asks 1 CPU and 2 GiB): the profile's cap, not a refusal;
	// a limit at the cap is left out, so the profile's own applies.
	for limits, want := range map[string]sandboxes.Resources{
		`"cpu":"3","memory":"1Gi"`:   {Memory: "1073741824"},
		`"cpu":"1","memory":"5Gi"`:   {CPUs: 1},
		`"cpu":"64","memory":"64Ti"`: {},
		`"cpu":"2","memory":"4Gi"`:   {}, // the profile's own, so a warm member can still be claimed
	} {
		id := rg.create(keyAlice, strings.Replace(fastGPTImageBody, `"cpu":"2","memory":"4096Mi"`, limits, 1))
		rg.made(id)
		// The container runs the profile's limits lowered by what the core was asked for (a memory asked at the
		// cap would show as its byte count, not the profile's "4g").
		p, err := osbProfiles[4].WithResources(want)
		if got := rg.spec(id).Profile.Resources; err != nil || got != p.Resources {
			t.Errorf("limits %s: the container runs %+v, want %+v (%v)", limits, got, p.Resources, err)
		}
	}
	for _, limits := range []string{`"cpu":"1m"`, `"memory":"1Ki"`} {
		body := strings.Replace(fastGPTImageBody, `"cpu":"2","memory":"4096Mi"`, limits, 1)
		if resp, m := rg.do("POST", "/v1/sandboxes", keyAlice, body); resp.StatusCode != 400 || m["code"] != CodeInvalidRequest {
			t.Errorf("limits %s below the engine's minimum: %d %v", limits, resp.StatusCode, m)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
