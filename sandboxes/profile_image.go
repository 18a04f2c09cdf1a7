package sandboxes

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// Any image: a profile may run an image that is not one of ours. The gateway then mounts our static agent
// read-only into the container (from AgentImage, see Config) and starts it as the container's command; the agent
// serves exec, files and the rest, and runs the image's own entrypoint and cmd as its supervised child, whose
// exit ends the container with the child's status (reported as the sandbox's crash reason). The hardening is the
// same as for our images; WritableRoot is the one relaxation a profile can make explicit.

// DefaultAgentImage is the image the injected agent is copied from when the configuration names none.
const DefaultAgentImage = "sandgate/sandbox:base"

// AgentMountPoint is where the injected agent's read-only volume is mounted in a sandbox of another image.
const AgentMountPoint = "/opt/sandgate"

// AgentBinaryName is the agent's file name in AgentMountPoint (and in /usr/local/bin of our images).
const AgentBinaryName = "sandgate-agent"

// SandboxHome is HOME in every sandbox: a tmpfs owned by the sandbox user (65532) whatever the image says.
const SandboxHome = "/home/sandbox"

// CodeImageNotAllowed answers a create that asks for an image the profile's allowed_images does not list.
const CodeImageNotAllowed = "image_not_allowed"

// CodeImageNotFound answers a create that asks for an allowed image the engine does not hold: sandgate never
// pulls, so the operator loads or builds the image first.
const CodeImageNotFound = "image_not_found"

// ImageChecker is the engine side of a caller-chosen image: whether the engine holds it. A driver that implements
// it lets Create refuse an absent image at once (CodeImageNotFound) instead of reporting a failed start later.
type ImageChecker interface {
	// ImagePresent returns nil when the engine holds image, an *Error with CodeImageNotFound when it does not.
	ImagePresent(ctx context.Context, image string) error
}

// DefaultResources are what a sandbox gets where its profile leaves a resource unset (the driver applies the same
// values); they are also the ceiling of a caller's ImageRequest.Resources under such a profile.
var DefaultResources = Resources{CPUs: 1, Memory: "1g", Pids: 512, Disk: "256m"}

// InjectsAgent reports whether sandboxes of p run our agent mounted into the image rather than as the image's
// own entrypoint.
func (p *Profile) InjectsAgent() bool {
	return p.InjectAgent || len(p.Entrypoint) > 0 || len(p.Cmd) > 0
}

func (p *Profile) validateImage() error {
	for _, f := range []struct {
		name string
		argv []string
	}{{"entrypoint", p.Entrypoint}, {"cmd", p.Cmd}} {
		for i, a := range f.argv {
			if strings.ContainsRune(a, 0) {
				return fmt.Errorf("profile %q: %s argument %d holds a NUL byte", p.ID, f.name, i)
			}
		}
		if len(f.argv) > 0 && strings.TrimSpace(f.argv[0]) == "" && f.name == "entrypoint" {
			return fmt.Errorf("profile %q: entrypoint's program is empty", p.ID)
		}
	}
	for _, pat := range p.AllowedImages {
		if strings.TrimSpace(pat) == "" {
			return fmt.Errorf("profile %q: allowed_images holds an empty entry", p.ID)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("profile %q: allowed_images %q is not a pattern: %w", p.ID, pat, err)
		}
		if !isPattern(pat) {
			if _, err := CanonicalImage(pat); err != nil {
				return fmt.Errorf("profile %q: allowed_images: %w", p.ID, err)
			}
			continue
		}
		// A pattern is matched against the canonical (familiar) form, which never starts with these.
		for _, prefix := range []string{"docker.io/", "index.docker.io/", "library/"} {
			if strings.HasPrefix(pat, prefix) {
				return fmt.Errorf("profile %q: allowed_images pattern %q: write it in Docker's short form, without %q (images are matched as `docker images` shows them)", p.ID, pat, prefix)
			}
		}
	}
	return nil
}

// isPattern reports whether an allowed_images entry holds path.Match syntax.
func isPattern(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// CanonicalImage is the one spelling of an image reference that the allow-list is checked against and the engine
// is given, so what was checked is what runs: Docker's short form ("debian:bookworm-slim",
// "registry.example/team/app:1"), without "docker.io/library/", with ":latest" written where neither a tag nor a
// digest is. A reference naming both a tag and a digest is refused: the engine would run the digest and ignore the
// tag an allow-list entry matched. Upper case, whitespace, a bare image ID and anything else that is not a
// reference are refused too.
func CanonicalImage(ref string) (string, error) {
	if ref == "" || len(ref) > 512 || strings.ContainsAny(ref, " \t\r\n\x00") {
		return "", fmt.Errorf("image %q is not an image reference", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("image %q is not an image reference: %w", ref, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	if tagged && digested {
		return "", fmt.Errorf("image %q names both a tag and a digest; name one", ref)
	}
	return reference.FamiliarString(reference.TagNameOnly(named)), nil
}

// ImageAllowed reports whether a caller may ask for image under this profile. Both sides are compared in their
// canonical form (CanonicalImage): "fastgpt", "fastgpt:latest", "docker.io/library/fastgpt:latest" are one image.
// A plain entry must equal the image; a pattern entry must match it as a path.Match pattern ('*' stops at '/', so
// "registry.example/team/*:*" allows that team's images and nothing below them). An image named by digest matches
// only an entry that itself holds a digest ('@'): a tag pattern never admits a digest, which could name any image
// the engine holds.
func (p *Profile) ImageAllowed(image string) bool {
	canon, err := CanonicalImage(image)
	if err != nil {
		return false
	}
	digested := strings.Contains(canon, "@")
	for _, pat := range p.AllowedImages {
		if digested != strings.Contains(pat, "@") {
			continue
		}
		if !isPattern(pat) {
			if c, err := CanonicalImage(pat); err == nil && c == canon {
				return true
			}
			continue
		}
		if ok, err := path.Match(pat, canon); err == nil && ok {
			return true
		}
	}
	return false
}

// ImageRequest asks for a sandbox of a profile's shape that runs a caller-chosen image: OpenSandbox's create
// (image uri, entrypoint, env, resource limits). The image must be on the profile's allowed_images; the agent is
// always injected; the resources may lower the profile's, never raise them.
type ImageRequest struct {
	Image string
	// Entrypoint and Cmd replace the image's own (Docker's rules); empty keeps them.
	Entrypoint []string
	Cmd        []string
	// Resources: zero fields keep the profile's.
	Resources Resources
}

// WithImage derives the profile a sandbox created with req runs under, or a typed error: image_not_allowed when
// the profile does not allow the image, validation_error for bad arguments or resources above the profile's.
func (p Profile) WithImage(req ImageRequest) (Profile, error) {
	if len(p.AllowedImages) == 0 {
		return p, &Error{Code: CodeImageNotAllowed, Message: fmt.Sprintf("profile %q lets no caller choose its image", p.ID),
			Details: map[string]any{"image": req.Image, "profile": p.ID}}
	}
	if !p.ImageAllowed(req.Image) {
		return p, &Error{Code: CodeImageNotAllowed, Message: fmt.Sprintf("image %q is not on profile %q's allowed_images", req.Image, p.ID),
			Details: map[string]any{"image": req.Image, "profile": p.ID}}
	}
	canon, err := CanonicalImage(req.Image)
	if err != nil { // ImageAllowed admits only canonical-able references
		return p, &Error{Code: CodeImageNotAllowed, Message: err.Error(), Details: map[string]any{"image": req.Image, "profile": p.ID}}
	}
	out := p
	out.Image = canon
	out.InjectAgent = true
	out.AllowedImages = nil
	out.WarmImages = 0
	out.Capabilities = slices.Clone(p.Capabilities)
	if len(req.Entrypoint) > 0 {
		out.Entrypoint, out.Cmd = slices.Clone(req.Entrypoint), nil
	}
	if len(req.Cmd) > 0 {
		out.Cmd = slices.Clone(req.Cmd)
	}
	res, err := lowerResources(p.Resources, req.Resources)
	if err != nil {
		return p, &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: %v", p.ID, err), Err: err}
	}
	out.Resources = res
	if err := out.validateImage(); err != nil {
		return p, &Error{Code: CodeInvalid, Message: err.Error(), Err: err}
	}
	return out, nil
}

// WithResources derives the profile a sandbox created with limits want runs under: want's non-zero fields replace
// the profile's, each at most the profile's own (or DefaultResources where it has none). Asking for more is a
// validation_error naming the cap: a silent clamp would hand a tenant less than it asked for and let it find out
// from an OOM kill.
func (p Profile) WithResources(want Resources) (Profile, error) {
	res, err := lowerResources(p.Resources, want)
	if err != nil {
		return p, &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: %v", p.ID, err), Err: err,
			Details: map[string]any{"profile": p.ID, "ceiling": p.ResourceCeiling()}}
	}
	out := p
	out.Capabilities = slices.Clone(p.Capabilities)
	out.Resources = res
	return out, nil
}

// ResourceCeiling is the most a caller may ask for under the profile's limits: its own, DefaultResources where it
// sets none.
func (p *Profile) ResourceCeiling() Resources {
	r := p.Resources
	if r.CPUs == 0 {
		r.CPUs = DefaultResources.CPUs
	}
	if r.Memory == "" {
		r.Memory = DefaultResources.Memory
	}
	if r.Pids == 0 {
		r.Pids = DefaultResources.Pids
	}
	if r.Disk == "" {
		r.Disk = DefaultResources.Disk
	}
	return r
}

// lowerResources applies a caller's limits under the profile's ceiling (its own values, or DefaultResources where
// it has none).
func lowerResources(ceiling, want Resources) (Resources, error) {
	out := ceiling
	capOf := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	if want.CPUs < 0 || want.Pids < 0 {
		return out, fmt.Errorf("resources must not be negative")
	}
	if want.CPUs > 0 {
		limit := ceiling.CPUs
		if limit == 0 {
			limit = DefaultResources.CPUs
		}
		if want.CPUs > limit {
			return out, fmt.Errorf("cpu %.3g is above the profile's %.3g", want.CPUs, limit)
		}
		out.CPUs = want.CPUs
	}
	if want.Pids > 0 {
		limit := ceiling.Pids
		if limit == 0 {
			limit = DefaultResources.Pids
		}
		if want.Pids > limit {
			return out, fmt.Errorf("pids %d is above the profile's %d", want.Pids, limit)
		}
		out.Pids = want.Pids
	}
	for _, r := range []struct {
		name        string
		want, limit string
		dst         *string
	}{
		{"memory", want.Memory, capOf(ceiling.Memory, DefaultResources.Memory), &out.Memory},
		{"disk", want.Disk, capOf(ceiling.Disk, DefaultResources.Disk), &out.Disk},
	} {
		if r.want == "" {
			continue
		}
		w, err := ParseBytes(r.want)
		if err != nil {
			return out, fmt.Errorf("%s: %w", r.name, err)
		}
		l, err := ParseBytes(r.limit)
		if err != nil {
			return out, fmt.Errorf("%s: %w", r.name, err)
		}
		if w == 0 {
			return out, fmt.Errorf("%s must be above zero", r.name)
		}
		if w > l {
			return out, fmt.Errorf("%s %s is above the profile's %s", r.name, r.want, r.limit)
		}
		*r.dst = r.want
	}
	if want.WorkspaceSize != "" {
		// No ceiling means unlimited: any size is a lower one.
		w, err := ParseBytes(want.WorkspaceSize)
		if err == nil && w < MinWorkspaceSize {
			err = fmt.Errorf("below the minimum of 16m")
		}
		if err != nil {
			return out, fmt.Errorf("workspace_size: %w", err)
		}
		if l := ceiling.WorkspaceBytes(); l > 0 && w > l {
			return out, fmt.Errorf("workspace_size %s is above the profile's %s", want.WorkspaceSize, ceiling.WorkspaceSize)
		}
		out.WorkspaceSize = want.WorkspaceSize
	}
	return out, nil
}

// ChildArgv is the command the injected agent supervises: Docker's rules for an image's ENTRYPOINT and CMD under
// a profile's overrides (a profile entrypoint clears the image's CMD; a profile cmd replaces it).
func ChildArgv(p Profile, imageEntrypoint, imageCmd []string) []string {
	entry, cmd := imageEntrypoint, imageCmd
	if len(p.Entrypoint) > 0 {
		entry, cmd = p.Entrypoint, nil
	}
	if len(p.Cmd) > 0 {
		cmd = p.Cmd
	}
	return append(slices.Clone(entry), cmd...)
}
