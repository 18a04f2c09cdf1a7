package opensandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Reserved metadata keys: what the dialect must remember of a create (its image and entrypoint, answered on every
// read) lives beside the tenant's metadata in the core's one store. OpenSandbox reserves the prefix, so a tenant
// can neither set nor see them.
const (
	reservedPrefix = "opensandbox.io/"
	keyImage       = reservedPrefix + "image"
	keyEntrypoint  = reservedPrefix + "entrypoint"
)

// ExtensionProfile is the `extensions` key that picks a sandgate profile by id when several share an image.
const ExtensionProfile = "sandgate.profile"

// maxCreateBody bounds POST /sandboxes's body.
const maxCreateBody = 1 << 20

// keepAliveEntrypoints only keep a container's PID 1 alive: the agent does that in every sandgate sandbox, so they
// are satisfied as they are, and the sandbox stays eligible for a warm-pool claim.
var keepAliveEntrypoints = [][]string{
	{"tail", "-f", "/dev/null"},
	{"sleep", "infinity"},
}

// entrypointService is the name under which the agent supervises a create's entrypoint.
const entrypointService = "entrypoint"

func decodeJSON(r *http.Request, limit int64, v any) *Error {
	dec := json.NewDecoder(io.LimitReader(r.Body, limit))
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, "reading the request body: %v", err)
	}
	return nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, p service.Principal) {
	var req CreateRequest
	if e := decodeJSON(r, maxCreateBody, &req); e != nil {
		writeError(w, e)
		return
	}
	creq, image, e := h.translateCreate(req, p)
	if e != nil {
		writeError(w, e)
		return
	}
	sb, err := h.cfg.Service.Create(r.Context(), p, creq)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	h.cfg.Logger.Info("opensandbox create", "sandbox", sb.ID, "owner", p.Owner, "profile", sb.Profile, "image", image)
	out := present(&sb)
	out.Image = nil // OpenSandbox's create answer carries no image
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	writeJSON(w, http.StatusAccepted, out)
}

// translateCreate checks an OpenSandbox create body and turns it into the core's request. Whatever sandgate cannot
// honour is refused with a typed error naming the field, never dropped.
func (h *Handler) translateCreate(req CreateRequest, p service.Principal) (sandboxes.CreateRequest, string, *Error) {
	bad := func(code, format string, args ...any) (sandboxes.CreateRequest, string, *Error) {
		return sandboxes.CreateRequest{}, "", errorf(http.StatusBadRequest, code, format, args...)
	}
	if req.SnapshotID != "" {
		return sandboxes.CreateRequest{}, "", errorf(http.StatusNotImplemented, CodeAPINotSupported,
			"snapshotId: creating from an OpenSandbox snapshot is not supported; create from an image")
	}
	if req.Image == nil || strings.TrimSpace(req.Image.URI) == "" {
		return bad(CodeInvalidRequest, "image.uri is required")
	}
	if req.Image.Auth != nil {
		return bad(CodeImageNotSupported, "image.auth: sandgate does not pull images; registry credentials are not used")
	}
	if len(req.Entrypoint) == 0 {
		return bad(CodeInvalidEntrypoint, "entrypoint is required with an image")
	}
	for _, a := range req.Entrypoint {
		if a == "" || strings.ContainsRune(a, 0) {
			return bad(CodeInvalidEntrypoint, "entrypoint: an argument is empty or holds a NUL byte")
		}
	}
	if len(req.Volumes) > 0 {
		return bad(CodeInvalidRequest, "volumes are not supported: a sandbox's workspace is its persistent volume, and host mounts are the operator's (profile binds)")
	}
	if req.CredentialProxy != nil && req.CredentialProxy.Enabled {
		return bad(CodeInvalidRequest, "credentialProxy: transparent MITM credential injection is not supported")
	}
	if _, ok := req.Extensions["poolRef"]; ok {
		return bad(CodeInvalidRequest, "extensions.poolRef: pools are sandgate profiles with warm_pool; create from the image")
	}
	if pl := req.Platform; pl != nil && (pl.OS != "linux" || pl.Arch != runtime.GOARCH) {
		return bad(CodeInvalidRequest, "platform %s/%s: this gateway runs linux/%s sandboxes", pl.OS, pl.Arch, runtime.GOARCH)
	}
	prof, anyImage, e := h.profileFor(req.Image.URI, req.Extensions[ExtensionProfile])
	if e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	limits, e := checkResources(req.ResourceLimits, "resourceLimits")
	if e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	if _, e := checkResources(req.ResourceRequests, "resourceRequests"); e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	ttl, e := h.ttlOf(req.Timeout)
	if e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	egressPolicy, e := checkNetworkPolicy(req.NetworkPolicy, prof)
	if e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	md, e := tenantMetadata(req.Metadata)
	if e != nil {
		return sandboxes.CreateRequest{}, "", e
	}
	ep, _ := json.Marshal(req.Entrypoint) // a string slice always marshals
	md[keyImage] = req.Image.URI
	md[keyEntrypoint] = string(ep)

	env := map[string]string{}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return bad(CodeInvalidRequest, "env %q: invalid name or value", k)
		}
		if strings.HasPrefix(strings.ToUpper(k), "SANDGATE_") {
			return bad(CodeInvalidRequest, "env %q: SANDGATE_* variables configure the sandbox's agent and are the operator's", k)
		}
		env[k] = v
	}
	var image *sandboxes.ImageRequest
	if anyImage {
		// The agent is injected and runs the entrypoint as its supervised child, as the image's own (Docker's
		// rule: the entrypoint replaces the image's ENTRYPOINT and CMD); its exit ends the sandbox.
		image = &sandboxes.ImageRequest{Image: req.Image.URI, Entrypoint: slices.Clone(req.Entrypoint)}
	} else if !slices.ContainsFunc(keepAliveEntrypoints, func(k []string) bool { return slices.Equal(k, req.Entrypoint) }) {
		services := append(slices.Clone(prof.Services), sandboxes.Service{
			Name: entrypointService, Command: "exec " + shellJoin(req.Entrypoint), Restart: "never",
		})
		b, err := json.Marshal(services)
		if err != nil {
			return bad(CodeInvalidEntrypoint, "entrypoint: %v", err)
		}
		env[sandboxes.EnvServices] = string(b)
	}
	if len(env) == 0 {
		env = nil
	}
	return sandboxes.CreateRequest{Profile: prof.ID, Owner: p.Owner, TTL: ttl, Env: env, Metadata: md, Egress: egressPolicy,
		Image: image, Resources: clampResources(limits, prof.ResourceCeiling())}, req.Image.URI, nil
}

// clampResources holds a create's limits to the profile's ceiling. The SDKs send resourceLimits on every create
// (the npm SDK's default is 1 CPU and 2 GiB when its caller names none), so refusing what is above the ceiling
// would refuse plain SDK use on a default profile; a limit is a maximum, and the profile's is the operator's.
// A limit at or above the ceiling is left out, so the profile's own applies and the create can still claim a
// warm-pool member.
func clampResources(want, ceiling sandboxes.Resources) sandboxes.Resources {
	if want.CPUs >= ceiling.CPUs {
		want.CPUs = 0
	}
	if want.Memory != "" {
		w, err1 := sandboxes.ParseBytes(want.Memory)
		c, err2 := sandboxes.ParseBytes(ceiling.Memory)
		if err1 == nil && err2 == nil && w >= c {
			want.Memory = ""
		}
	}
	if want.WorkspaceSize != "" {
		w, err1 := sandboxes.ParseBytes(want.WorkspaceSize)
		if c := ceiling.WorkspaceBytes(); err1 == nil && c > 0 && w >= c {
			want.WorkspaceSize = ""
		}
	}
	return want
}

// profileFor picks the profile a create's image runs under: the profile whose own image it is (the named one when
// the extension names it), else one whose allowed_images admits it (anyImage: the agent is injected into it). Both
// sides are compared in their canonical form (sandboxes.CanonicalImage), so no spelling of a reference (a
// docker.io/library/ prefix, an implicit :latest, a digest behind an allowed tag) reaches an image the operator did
// not allow. Anything else is refused, naming what is served.
func (h *Handler) profileFor(uri, named string) (prof sandboxes.Profile, anyImage bool, e *Error) {
	canon, err := sandboxes.CanonicalImage(uri)
	if err != nil {
		return sandboxes.Profile{}, false, errorf(http.StatusBadRequest, CodeImageNotSupported, "image.uri: %v", err)
	}
	var candidates []sandboxes.Profile
	for _, p := range h.cfg.Service.Profiles() {
		if named == "" || p.ID == named {
			candidates = append(candidates, p)
		}
	}
	if named != "" && len(candidates) == 0 {
		return sandboxes.Profile{}, false, errorf(http.StatusBadRequest, CodeImageNotSupported, "extensions.%s: no profile %q", ExtensionProfile, named)
	}
	var served []string
	for _, p := range candidates {
		if own, err := sandboxes.CanonicalImage(p.Image); err == nil && own == canon {
			return p, false, nil
		}
		if !slices.Contains(served, p.Image) {
			served = append(served, p.Image)
		}
	}
	for _, p := range candidates {
		if p.ImageAllowed(canon) {
			return p, true, nil
		}
		for _, a := range p.AllowedImages {
			if !slices.Contains(served, a) {
				served = append(served, a)
			}
		}
	}
	return sandboxes.Profile{}, false, errorf(http.StatusBadRequest, CodeImageNotSupported,
		"image %q is not served by this gateway (nothing is pulled); images it runs: %s", uri, strings.Join(served, ", "))
}

// The engine's smallest limits (Docker refuses less), checked here so such a create fails at once, not at start.
const (
	minCPU    = 0.01
	minMemory = 6 << 20
)

// checkResources parses Kubernetes-style quantities. cpu and memory become the sandbox's limits, held to the
// profile's (clampResources, docs/opensandbox.md); disk caps the workspace volume, under
// the profile's workspace_size, and resourceRequests are scheduling hints a single host has no use for.
func checkResources(rl map[string]string, field string) (sandboxes.Resources, *Error) {
	var out sandboxes.Resources
	for k, v := range rl {
		switch k {
		case "cpu":
			c, err := parseCPU(v)
			if err == nil && c < minCPU {
				err = fmt.Errorf("below the engine's minimum of %g", minCPU)
			}
			if err != nil {
				return out, errorf(http.StatusBadRequest, CodeInvalidRequest, "%s.cpu %q: %v", field, v, err)
			}
			out.CPUs = c
		case "memory", "disk", "ephemeral-storage":
			n, err := parseQuantity(v)
			if err != nil {
				return out, errorf(http.StatusBadRequest, CodeInvalidRequest, "%s.%s %q: %v", field, k, v, err)
			}
			if k == "disk" {
				// The workspace's size limit, held to the profile's (clampResources).
				out.WorkspaceSize = strconv.FormatInt(max(n, sandboxes.MinWorkspaceSize), 10)
			}
			if k == "memory" {
				if n < minMemory {
					return out, errorf(http.StatusBadRequest, CodeInvalidRequest, "%s.memory %q: below the engine's minimum of 6Mi", field, v)
				}
				out.Memory = strconv.FormatInt(n, 10)
			}
		case "gpu", "nvidia.com/gpu":
			if v != "0" {
				return out, errorf(http.StatusBadRequest, CodeInvalidRequest, "%s.%s: this gateway has no GPUs to give", field, k)
			}
		default:
			return out, errorf(http.StatusBadRequest, CodeInvalidRequest, "%s.%s: unknown resource", field, k)
		}
	}
	return out, nil
}

// parseCPU reads "2", "0.5" or "500m" as cores.
func parseCPU(s string) (float64, error) {
	div := 1.0
	if m, ok := strings.CutSuffix(s, "m"); ok {
		s, div = m, 1000
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a CPU quantity")
	}
	return v / div, nil
}

// parseQuantity reads a byte quantity with a Kubernetes suffix (Ki, Mi, Gi, Ti, k, M, G, T) or none.
func parseQuantity(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	mult := 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("not a byte quantity")
	}
	return int64(v * mult), nil
}

// ttlOf maps timeout (seconds, at least 60; null or absent: the gateway's default lifetime).
func (h *Handler) ttlOf(timeout *float64) (time.Duration, *Error) {
	if timeout == nil {
		return 0, nil
	}
	t := *timeout
	if math.IsNaN(t) || t < 60 || t > 365*24*3600 {
		return 0, errorf(http.StatusBadRequest, CodeInvalidRequest, "timeout must be at least 60 seconds (and at most a year)")
	}
	d := time.Duration(t * float64(time.Second))
	if h.cfg.MaxTimeout > 0 && d > h.cfg.MaxTimeout {
		return 0, errorf(http.StatusBadRequest, CodeInvalidRequest, "timeout %.0fs is over this gateway's maximum of %.0fs", t, h.cfg.MaxTimeout.Seconds())
	}
	return d, nil
}

// tenantMetadata copies a tenant's metadata, refusing the reserved prefix.
func tenantMetadata(in map[string]string) (map[string]string, *Error) {
	out := make(map[string]string, len(in)+2)
	for k, v := range in {
		if strings.HasPrefix(k, reservedPrefix) {
			return nil, errorf(http.StatusBadRequest, CodeInvalidMetadata, "metadata key %q: the %s prefix is reserved", k, reservedPrefix)
		}
		out[k] = v
	}
	if err := sandboxes.ValidateMetadata(out); err != nil {
		return nil, errorf(http.StatusBadRequest, CodeInvalidMetadata, "%s", toError(err).Message)
	}
	return out, nil
}

// shellJoin quotes argv for bash -c, each argument in single quotes.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
