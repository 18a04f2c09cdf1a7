package sandboxes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProfileImageValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Profile)
		err  string
	}{
		{name: "inject alone", edit: func(p *Profile) { p.InjectAgent = true }},
		{name: "entrypoint and cmd", edit: func(p *Profile) { p.Entrypoint = []string{"/e.sh"}; p.Cmd = []string{"a", ""} }},
		{name: "empty entrypoint program", edit: func(p *Profile) { p.Entrypoint = []string{" ", "x"} }, err: "entrypoint's program is empty"},
		{name: "NUL in cmd", edit: func(p *Profile) { p.Cmd = []string{"a\x00b"} }, err: "NUL"},
		{name: "bad pattern", edit: func(p *Profile) { p.AllowedImages = []string{"repo/[a"} }, err: "not a pattern"},
		{name: "empty pattern", edit: func(p *Profile) { p.AllowedImages = []string{""} }, err: "empty entry"},
		{name: "writable root", edit: func(p *Profile) { p.WritableRoot = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProfile("p")
			tc.edit(&p)
			err := p.Validate()
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestImageAllowed(t *testing.T) {
	p := Profile{ID: "osb", AllowedImages: []string{"registry.example/fastgpt-agent-sandbox:*", "sandgate/sandbox:base", "registry.example/team/*:*"}}
	for image, want := range map[string]bool{
		"registry.example/fastgpt-agent-sandbox:v4.14":          true,
		"sandgate/sandbox:base":                                 true,
		"registry.example/team/tool:1":                          true,
		"sandgate/sandbox:browser":                              false,
		"sandgate/sandbox":                                      false, // compared as written
		"registry.example/team/sub/tool:1":                      false, // '*' stops at '/'
		"registry.example/fastgpt-agent-sandbox:v1/../../evil":  false,
		"evil.example/registry.example/fastgpt-agent-sandbox:1": false,
		"registry.example/fastgpt-agent-sandbox:1 --privileged": false,
		"":                           false,
		"registry.example/team/x:\n": false,
		"sandgate/sandbox:base@sha256:" + strings.Repeat("a", 64):                  false, // the engine would run the digest
		"registry.example/fastgpt-agent-sandbox@sha256:" + strings.Repeat("a", 64): false, // a tag pattern admits no digest
		strings.Repeat("a", 64):                               false, // an image ID
		"SANDGATE/sandbox:base":                               false,
		"docker.io/sandgate/sandbox:base":                     true, // one image, two spellings
		"registry.example/fastgpt-agent-sandbox":              true, // :latest, which the pattern's '*' matches
		"registry.example/fastgpt-agent-sandbox:-x":           false,
		"registry.example/fastgpt-agent-sandbox:v1@sha256:00": false,
	} {
		if got := p.ImageAllowed(image); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestWithImage(t *testing.T) {
	base := Profile{ID: "osb", Image: "sandgate/sandbox:base", Capabilities: []string{CapShell},
		Resources: Resources{CPUs: 2, Memory: "2g"}, AllowedImages: []string{"repo/*:*"}}
	for _, tc := range []struct {
		name string
		req  ImageRequest
		code string
		want func(Profile) bool
	}{
		{name: "allowed", req: ImageRequest{Image: "repo/app:1", Entrypoint: []string{"/e.sh"}, Resources: Resources{CPUs: 0.5, Memory: "512m"}},
			want: func(p Profile) bool {
				return p.Image == "repo/app:1" && p.InjectsAgent() && slices.Equal(p.Entrypoint, []string{"/e.sh"}) &&
					p.Resources.CPUs == 0.5 && p.Resources.Memory == "512m" && p.AllowedImages == nil
			}},
		{name: "profile limits kept", req: ImageRequest{Image: "repo/app:1"},
			want: func(p Profile) bool {
				return p.Resources.CPUs == 2 && p.Resources.Memory == "2g" && len(p.Entrypoint) == 0
			}},
		{name: "not allowed", req: ImageRequest{Image: "other/app:1"}, code: CodeImageNotAllowed},
		{name: "more cpu than the profile", req: ImageRequest{Image: "repo/app:1", Resources: Resources{CPUs: 3}}, code: CodeInvalid},
		{name: "more memory than the profile", req: ImageRequest{Image: "repo/app:1", Resources: Resources{Memory: "3g"}}, code: CodeInvalid},
		{name: "more disk than the default", req: ImageRequest{Image: "repo/app:1", Resources: Resources{Disk: "1g"}}, code: CodeInvalid},
		{name: "more pids than the default", req: ImageRequest{Image: "repo/app:1", Resources: Resources{Pids: 100000}}, code: CodeInvalid},
		{name: "negative", req: ImageRequest{Image: "repo/app:1", Resources: Resources{CPUs: -1}}, code: CodeInvalid},
		{name: "bad size", req: ImageRequest{Image: "repo/app:1", Resources: Resources{Memory: "lots"}}, code: CodeInvalid},
		{name: "zero memory", req: ImageRequest{Image: "repo/app:1", Resources: Resources{Memory: "0"}}, code: CodeInvalid},
		{name: "NUL in entrypoint", req: ImageRequest{Image: "repo/app:1", Entrypoint: []string{"/e.sh\x00"}}, code: CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.WithImage(tc.req)
			if ErrorCode(err) != tc.code {
				t.Fatalf("WithImage: %v, want code %q", err, tc.code)
			}
			if tc.want != nil && !tc.want(got) {
				t.Fatalf("derived profile %+v", got)
			}
		})
	}
	closed := base
	closed.AllowedImages = nil
	if _, err := closed.WithImage(ImageRequest{Image: "repo/app:1"}); ErrorCode(err) != CodeImageNotAllowed {
		t.Fatalf("a profile without allowed_images let a caller choose: %v", err)
	}
}

func TestChildArgv(t *testing.T) {
	img := []string{"/docker-entrypoint.sh"}
	cmd := []string{"nginx", "-g", "daemon off;"}
	for _, tc := range []struct {
		name string
		p    Profile
		want []string
	}{
		{name: "image's own", want: []string{"/docker-entrypoint.sh", "nginx", "-g", "daemon off;"}},
		{name: "entrypoint clears cmd", p: Profile{Entrypoint: []string{"/e.sh"}}, want: []string{"/e.sh"}},
		{name: "cmd replaces cmd", p: Profile{Cmd: []string{"sleep", "1"}}, want: []string{"/docker-entrypoint.sh", "sleep", "1"}},
		{name: "both", p: Profile{Entrypoint: []string{"/e.sh"}, Cmd: []string{"x"}}, want: []string{"/e.sh", "x"}},
	} {
		if got := ChildArgv(tc.p, img, cmd); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzWithImage feeds tenant-chosen image references and limits (OpenSandbox's create) to the allow-list: whatever
// comes in, an image not matching an entry is refused and an accepted one never exceeds the profile's limits.
func FuzzWithImage(f *testing.F) {
	f.Add("repo/app:1", "/e.sh", 0.5, "512m", int64(10))
	f.Add("other/app:1", "", 0.0, "", int64(0))
	f.Add("repo/app:1/../x", "", 9.0, "9g", int64(-1))
	f.Add("repo/*:*", "\x00", 1.0, "1.5GiB", int64(512))
	base := Profile{ID: "osb", Image: "sandgate/sandbox:base", Resources: Resources{CPUs: 1, Memory: "1g"}, AllowedImages: []string{"repo/*:*"}}
	f.Fuzz(func(t *testing.T, image, entry string, cpus float64, memory string, pids int64) {
		req := ImageRequest{Image: image, Resources: Resources{CPUs: cpus, Memory: memory, Pids: pids}}
		if entry != "" {
			req.Entrypoint = []string{entry}
		}
		p, err := base.WithImage(req)
		if err != nil {
			if ErrorCode(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !base.ImageAllowed(p.Image) || strings.ContainsAny(p.Image, "/") && !strings.HasPrefix(p.Image, "repo/") {
			t.Fatalf("accepted image %q", p.Image)
		}
		if p.Resources.CPUs > 1 || p.Resources.Pids > DefaultResources.Pids {
			t.Fatalf("limits above the profile: %+v", p.Resources)
		}
		if mem, err := ParseBytes(p.Resources.Memory); err != nil || mem > 1<<30 {
			t.Fatalf("memory above the profile: %q %v", p.Resources.Memory, err)
		}
		if err := p.Validate(); err != nil && p.ID != "" {
			t.Fatalf("derived profile invalid: %v", err)
		}
	})
}

// TestCreateFromImage: a caller's image reaches the container only through the profile's allow-list, never
// claims a warm member, and the container spec injects the agent with the sandbox's HOME.
func TestCreateFromImage(t *testing.T) {
	osb := testProfile("osb")
	osb.WarmPoolSize = 1
	osb.AllowedImages = []string{"repo/fastgpt:*"}
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{osb}, AgentImage: "agent/img:1"})
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "tenant", Image: &ImageRequest{Image: "evil/miner:latest"}}); ErrorCode(err) != CodeImageNotAllowed {
		t.Fatalf("a tenant chose an image off the allow-list: %v", err)
	}
	sb, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "tenant", Env: map[string]string{"A": "1"},
		Image: &ImageRequest{Image: "repo/fastgpt:v1", Entrypoint: []string{"/home/sandbox/entrypoint.sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.LaunchType == LaunchWarm {
		t.Fatal("an image create claimed a warm member of the profile's own image")
	}
	mustReady(t, m, sb.ID)
	d.mu.Lock()
	var spec *ContainerSpec
	for _, c := range d.containers {
		if c.spec.Labels["unit.id"] == sb.ID {
			s := c.spec
			spec = &s
		}
	}
	d.mu.Unlock()
	if spec == nil {
		t.Fatal("no container for the sandbox")
	}
	if spec.Image != "repo/fastgpt:v1" || spec.AgentImage != "agent/img:1" || spec.AgentVolumePrefix != "unit-agent-" ||
		spec.Env["HOME"] != SandboxHome || spec.Env["A"] != "1" || !slices.Equal(spec.Profile.Entrypoint, []string{"/home/sandbox/entrypoint.sh"}) {
		t.Fatalf("spec %+v", spec)
	}
	// A profile of our own image injects nothing.
	plain, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "tenant", Env: map[string]string{"B": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, plain.ID)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.containers {
		if c.spec.Labels["unit.id"] == plain.ID && (c.spec.AgentImage != "" || c.spec.Env["HOME"] != "") {
			t.Fatalf("plain profile spec injects: %+v", c.spec)
		}
	}
}

func TestParseBytesForms(t *testing.T) {
	for in, want := range map[string]int64{
		"512m": 512 << 20, "1g": 1 << 30, "1.5GiB": 3 << 29, "512Mi": 512 << 20, "2Gi": 2 << 30, "64Ki": 64 << 10,
		"1048576": 1 << 20, "10MB": 10 << 20,
	} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "i", "mi", "5xi", "-1m", "lots"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}

// TestDeathWhileStartingKeepsContainer: a container that dies before its agent is ready (an injected image's
// entrypoint exiting at once) is kept with its log; its next use starts the same container again.
func TestDeathWhileStartingKeepsContainer(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}})
	d.mu.Lock()
	d.startDelay = 500 * time.Millisecond
	d.mu.Unlock()
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "p", Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	var cid string
	waitFor(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for id := range d.containers {
			cid = id
		}
		return cid != ""
	})
	d.die(cid, 3, false)
	waitFor(t, func() bool {
		got, err := m.Get(context.Background(), sb.ID)
		m.mu.RLock()
		launching := m.entries[sb.ID].launching
		m.mu.RUnlock()
		return err == nil && got.Died != nil && !launching
	})
	if n, _ := d.count(); n != 1 {
		t.Fatalf("%d containers after a death while starting, want the dead one kept", n)
	}
	d.mu.Lock()
	d.startDelay = 0
	d.mu.Unlock()
	waitFor(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := m.EnsureRunning(ctx, sb.ID)
		return err == nil
	})
	d.mu.Lock()
	creates := d.creates
	d.mu.Unlock()
	if creates != 1 {
		t.Fatalf("%d creates: the recovery did not reuse the kept container", creates)
	}
}

func TestCanonicalImage(t *testing.T) {
	for in, want := range map[string]string{
		"debian:bookworm-slim":                         "debian:bookworm-slim",
		"debian":                                       "debian:latest",
		"docker.io/library/debian:bookworm-slim":       "debian:bookworm-slim",
		"index.docker.io/library/debian":               "debian:latest",
		"library/debian:12":                            "debian:12",
		"docker.io/team/app:1":                         "team/app:1",
		"registry.example:5000/team/app":               "registry.example:5000/team/app:latest",
		"app@sha256:" + strings.Repeat("b", 64):        "app@sha256:" + strings.Repeat("b", 64),
		"localhost/fastgpt-agent-sandbox:v4":           "localhost/fastgpt-agent-sandbox:v4",
		"fastgpt-agent-sandbox":                        "fastgpt-agent-sandbox:latest",
		"registry.example/fastgpt-agent-sandbox:v4.14": "registry.example/fastgpt-agent-sandbox:v4.14",
	} {
		if got, err := CanonicalImage(in); err != nil || got != want {
			t.Errorf("CanonicalImage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Debian", "app:1@sha256:" + strings.Repeat("b", 64), strings.Repeat("c", 64), "a b", "app:",
		"-app", "app\x00", "../app", strings.Repeat("a/", 300) + "x"} {
		if got, err := CanonicalImage(bad); err == nil {
			t.Errorf("CanonicalImage(%q) = %q, want an error", bad, got)
		}
	}
}

// TestAllowedImagesPatternsInShortForm: a pattern is matched against the short form, so one written with the
// docker.io prefix could never match and is refused at load instead of silently allowing nothing.
func TestAllowedImagesPatternsInShortForm(t *testing.T) {
	for entry, ok := range map[string]bool{"docker.io/library/fastgpt:*": false, "library/*:*": false, "index.docker.io/team/*:*": false,
		"docker.io/library/fastgpt:v1": true, "fastgpt:*": true, "Fastgpt:v1": false} {
		p := testProfile("p")
		p.AllowedImages = []string{entry}
		if err := p.Validate(); (err == nil) != ok {
			t.Errorf("allowed_images %q: Validate() = %v", entry, err)
		}
	}
}

// TestCreateChecksImagePresence: an allowed image the engine does not hold is refused before anything is
// recorded; an image off the allow-list is refused without asking the engine (a tenant learns nothing of what it holds).
func TestCreateChecksImagePresence(t *testing.T) {
	osb := testProfile("osb")
	osb.AllowedImages = []string{"repo/*:*"}
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{osb}, AgentImage: "agent/img:1"})
	d.mu.Lock()
	d.absentImages = map[string]bool{"repo/absent:1": true}
	d.mu.Unlock()
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "o", Image: &ImageRequest{Image: "docker.io/repo/absent:1"}}); ErrorCode(err) != CodeImageNotFound {
		t.Fatalf("an absent image: %v", err)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "o", Image: &ImageRequest{Image: "other/x:1"}}); ErrorCode(err) != CodeImageNotAllowed {
		t.Fatalf("an image off the list: %v", err)
	}
	d.mu.Lock()
	checks, n := d.imageChecks, len(d.containers)
	d.mu.Unlock()
	if checks != 1 || n != 0 {
		t.Fatalf("%d engine checks, %d containers", checks, n)
	}
	if list, _, _ := m.List(ctx, ListOptions{}); len(list) != 0 {
		t.Fatalf("refused creates were recorded: %v", list)
	}
	sb, err := m.Create(ctx, CreateRequest{Profile: "osb", Owner: "o", Image: &ImageRequest{Image: "repo/present"}})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.containers {
		if c.spec.Image != "repo/present:latest" {
			t.Fatalf("the engine was given %q, not the checked canonical reference", c.spec.Image)
		}
	}
}

// TestCreateWithResources: a create's limits lower the profile's for that sandbox alone, asking above them is a
// validation_error naming the cap, and such a create never claims a warm member of the profile's shape.
func TestCreateWithResources(t *testing.T) {
	p := testProfile("p")
	p.Resources = Resources{CPUs: 1, Memory: "1g"}
	p.WarmPoolSize = 1
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{p}})
	ctx := context.Background()
	_, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "o", Resources: Resources{CPUs: 2}})
	var se *Error
	if ErrorCode(err) != CodeInvalid || !errors.As(err, &se) || !strings.Contains(se.Message, "above the profile's 1") {
		t.Fatalf("cpu above the cap: %v", err)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "o", Resources: Resources{Memory: "2g"}}); ErrorCode(err) != CodeInvalid ||
		!strings.Contains(err.Error(), "above the profile's 1g") {
		t.Fatalf("memory above the cap: %v", err)
	}
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	sb, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "o", Resources: Resources{CPUs: 0.5, Memory: "536870912"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.LaunchType == LaunchWarm {
		t.Fatal("a create with its own limits claimed a warm member")
	}
	mustReady(t, m, sb.ID)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.containers {
		if c.spec.Labels["unit.id"] == sb.ID && (c.spec.Profile.Resources.CPUs != 0.5 || c.spec.Profile.Resources.Memory != "536870912") {
			t.Fatalf("spec resources %+v", c.spec.Profile.Resources)
		}
	}
}
