package opensandbox

import (
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// FuzzProxyPath: whatever a tenant puts in a proxy path, an admitted rest never resolves outside the route.
func FuzzProxyPath(f *testing.F) {
	for _, s := range []string{"/sandboxes/a/proxy/44772/ping", "/v1/sandboxes/a.k/proxy/1/../x", "/sandboxes/a/proxy/44772/%2e%2e/v1",
		"/sandboxes/a/proxy/80/x%2f..%2fy", "/sandboxes/../proxy/1/", "/sandboxes/a/proxy/65535/%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		pa, ok := parseProxyPath(p)
		if !ok {
			return
		}
		// The parse only splits: the id, key and port come from their own segments and the rest is the path's tail.
		head, tail := strings.TrimSuffix(p, pa.Rest), ""
		if i := strings.LastIndex(head, "/proxy/"); i >= 0 {
			head, tail = head[:i], head[i+len("/proxy/"):]
		}
		digits, err := strconv.Atoi(tail)
		// An empty id is parsed as such; admitProxy refuses it as an invalid id (404).
		if strings.ContainsRune(pa.ID+pa.Key, '/') || pa.Port < 0 || pa.Port > 99999 ||
			pa.Rest != "" && pa.Rest[0] != '/' || !strings.HasSuffix(p, pa.Rest) || err != nil || digits != pa.Port ||
			!strings.HasSuffix(head, "/sandboxes/"+pa.ID+"."+pa.Key) && !(pa.Key == "" && strings.HasSuffix(head, "/sandboxes/"+pa.ID)) {
			t.Fatalf("%q parsed as %+v", p, pa)
		}
		if checkRest(pa.Rest) != nil {
			return
		}
		u, err := url.PathUnescape(pa.Rest)
		if err != nil {
			t.Fatalf("admitted an unescapable rest %q", pa.Rest)
		}
		for _, seg := range strings.Split(u, "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("admitted dot segment in %q", p)
			}
		}
	})
}

// FuzzCreateBody: no create body makes the translation panic, and an accepted one names a known profile, runs
// that profile's own image or one its allowed_images admits (never by digest behind a tag), and carries no
// reserved metadata from the tenant.
func FuzzCreateBody(f *testing.F) {
	f.Add(fastGPTBody)
	f.Add(`{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["a'b"],"timeout":60,"resourceLimits":{"cpu":"500m","memory":"1Gi"}}`)
	f.Add(`{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"deny","egress":[{"action":"deny","target":"*.x"}]}}`)
	f.Add(fastGPTImageBody)
	f.Add(`{"image":{"uri":"docker.io/library/fastgpt-agent-sandbox:v1@sha256:` + strings.Repeat("a", 64) + `"},"entrypoint":["/e.sh"]}`)
	f.Add(`{"image":{"uri":"registry.example/team/../x:1"},"entrypoint":["sh"],"resourceLimits":{"cpu":"0.001","memory":"99999Ti"}}`)
	f.Add(`{"image":{"uri":"fastgpt-agent-sandbox"},"entrypoint":["tail","-f","/dev/null"],"extensions":{"sandgate.profile":"base"}}`)
	m, _ := sandboxestest.NewManager(f, sandboxes.Config{Profiles: osbProfiles})
	h := New(Config{Service: service.New(service.Config{Sandboxes: m})})
	f.Fuzz(func(t *testing.T, body string) {
		var req CreateRequest
		if err := jsonUnmarshal(body, &req); err != nil {
			return
		}
		creq, _, e := h.translateCreate(req, service.Principal{Owner: "o"})
		if e != nil {
			if e.Code == "" || e.Status == 0 {
				t.Fatalf("untyped refusal %+v", e)
			}
			return
		}
		if creq.Profile == "" || creq.Owner != "o" {
			t.Fatalf("accepted %+v", creq)
		}
		// The image that will run is the profile's own, or one its allowed_images admits in canonical form.
		var prof sandboxes.Profile
		for _, p := range m.Profiles() {
			if p.ID == creq.Profile {
				prof = p
			}
		}
		if creq.Image == nil {
			own, err1 := sandboxes.CanonicalImage(prof.Image)
			asked, err2 := sandboxes.CanonicalImage(req.Image.URI)
			if err1 != nil || err2 != nil || own != asked {
				t.Fatalf("image %q accepted as profile %q's own", req.Image.URI, prof.ID)
			}
		} else if derived, err := prof.WithImage(*creq.Image); err == nil {
			if strings.Contains(derived.Image, "@") || !prof.ImageAllowed(derived.Image) {
				t.Fatalf("image %q runs %q under %q", req.Image.URI, derived.Image, prof.ID)
			}
		}
		if c := prof.ResourceCeiling(); creq.Resources.CPUs < 0 || creq.Resources.CPUs > c.CPUs || creq.Resources.CPUs > 0 && creq.Resources.CPUs < minCPU {
			t.Fatalf("cpu %v accepted under %v", creq.Resources.CPUs, c.CPUs)
		}
		if _, err := prof.WithResources(creq.Resources); err != nil {
			t.Fatalf("limits the core refuses: %+v: %v", creq.Resources, err)
		}
		for k := range req.Metadata {
			if strings.HasPrefix(k, reservedPrefix) {
				t.Fatalf("reserved key %q accepted", k)
			}
		}
	})
}

// FuzzCheckResources: whatever quantities a create body names, the parse never panics, and accepted limits are
// ones the engine takes: a finite CPU count of at least minCPU (or none) and a memory of at least minMemory bytes in
// decimal (or none).
func FuzzCheckResources(f *testing.F) {
	for _, s := range [][3]string{{"500m", "1Gi", "10Gi"}, {"2", "512Mi", "1G"}, {"0.001", "6Mi", ""}, {"1e-9", "0.5", "0.1"},
		{"NaN", "Inf", "-1"}, {"0x1p-2", "1e30Ti", "9223372036854775807"}, {"1m", "6291455", "1k"}, {"", "", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, cpu, memory, disk string) {
		rl := map[string]string{}
		for k, v := range map[string]string{"cpu": cpu, "memory": memory, "disk": disk} {
			if v != "" {
				rl[k] = v
			}
		}
		res, e := checkResources(rl, "resourceLimits")
		if e != nil {
			if e.Code == "" || e.Status == 0 {
				t.Fatalf("untyped refusal %+v", e)
			}
			return
		}
		if res.CPUs != 0 && (res.CPUs < minCPU || math.IsInf(res.CPUs, 0) || math.IsNaN(res.CPUs)) || rl["cpu"] != "" && res.CPUs == 0 {
			t.Fatalf("cpu %q accepted as %v", cpu, res.CPUs)
		}
		if rl["memory"] != "" {
			n, err := strconv.ParseInt(res.Memory, 10, 64)
			if err != nil || n < minMemory {
				t.Fatalf("memory %q accepted as %q", memory, res.Memory)
			}
		}
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
