package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Skill injection (a profile's `skills` option, sandboxes/profile_skills.go): before the first exec of a sandbox,
// and again after its owner's releases change, the built-in skills of its capabilities (builtin_skills/) and the
// owner's active releases are written into the workspace as <dir>/<skill>/SKILL.md (YAML frontmatter: name,
// description; then, for a release, the candidate's notes and payload). Writes go
// through the agent, as the sandbox user, into the confined workspace: the gateway never writes a tenant's tree by
// host path. A skill whose release is no longer active is removed from the directory; other directories there (an
// agent's own skills) are never touched.

// builtinSkills are the skills every sandbox of a profile with `skills` gets, by capability (Ship's and Gull's
// built-in skills, in our words): how to use this sandbox. A released skill of the same name replaces one.
//
//go:embed builtin_skills/*/SKILL.md
var builtinSkills embed.FS

var builtinByCapability = []struct{ capability, dir string }{
	{sandboxes.CapPython, "python-sandbox"},
	{sandboxes.CapBrowser, "browser-automation"},
}

// Bounds of one injection: the skills written, and the time it may take before the exec goes on without it.
const (
	MaxInjectedSkills = 200
	skillInjectTime   = 15 * time.Second
	skillInjectCache  = 10000 // sandboxes remembered; past it the memory starts over (injection is idempotent)
)

// skillInjections remembers what was last written into each sandbox, so an exec costs one map read.
type skillInjections struct {
	mu   sync.Mutex
	done map[string]injected
}

type injected struct {
	rev    uint64 // the owner's skills revision the files were made from
	dir    string
	digest string
	dirs   []string
}

func (si *skillInjections) get(id string) (injected, bool) {
	si.mu.Lock()
	defer si.mu.Unlock()
	v, ok := si.done[id]
	return v, ok
}

func (si *skillInjections) put(id string, v injected) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.done == nil || len(si.done) >= skillInjectCache {
		si.done = map[string]injected{}
	}
	si.done[id] = v
}

// skillFile is one skill's SKILL.md.
type skillFile struct {
	dir     string
	content []byte
}

// SkillDirName is the flat directory a skill key is written to: the key when it is made of [A-Za-z0-9._-] and does
// not start with a dot or a dash, otherwise the key's safe characters and a hash of the key (so two keys never
// share a directory, and no key names a path outside its own).
func SkillDirName(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 64 {
			break
		}
	}
	name := strings.TrimLeft(b.String(), ".-")
	if name == key && name != "" {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	if name == "" {
		return "skill-" + hex.EncodeToString(sum[:6])
	}
	return name + "-" + hex.EncodeToString(sum[:6])
}

// yamlString is s as a YAML double-quoted scalar (JSON's string syntax is a subset of it).
func yamlString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// renderSkill writes a release's SKILL.md.
func renderSkill(r *SkillRelease, c *SkillCandidate, payload *SkillPayload) []byte {
	var b bytes.Buffer
	desc := fmt.Sprintf("Skill %s, release v%d (%s)", r.SkillKey, r.Version, r.Stage)
	if c != nil && c.Summary != nil && *c.Summary != "" {
		desc = *c.Summary
	}
	fmt.Fprintf(&b, "---\nname: %s\ndescription: %s\nversion: %d\nstage: %s\nrelease_id: %s\n---\n\n",
		yamlString(r.SkillKey), yamlString(desc), r.Version, yamlString(r.Stage), yamlString(r.ID))
	fmt.Fprintf(&b, "# %s\n\n%s\n", strings.ReplaceAll(r.SkillKey, "\n", " "), desc)
	if c == nil {
		return b.Bytes()
	}
	if c.UsageNotes != nil && *c.UsageNotes != "" {
		fmt.Fprintf(&b, "\n## Usage\n\n%s\n", *c.UsageNotes)
	}
	for _, sec := range []struct {
		title string
		v     map[string]any
	}{{"Preconditions", c.Preconditions}, {"Postconditions", c.Postconditions}} {
		if sec.v != nil {
			j, _ := json.MarshalIndent(sec.v, "", "  ")
			fmt.Fprintf(&b, "\n## %s\n\n```json\n%s\n```\n", sec.title, j)
		}
	}
	if payload != nil {
		var pretty bytes.Buffer
		if json.Indent(&pretty, payload.Payload, "", "  ") != nil {
			pretty.Write(payload.Payload)
		}
		fmt.Fprintf(&b, "\n## Payload (%s)\n\n```json\n%s\n```\n", strings.ReplaceAll(payload.Kind, "\n", " "), pretty.Bytes())
	}
	fmt.Fprintf(&b, "\n## Source executions\n\n")
	for _, id := range c.SourceExecutionIDs {
		fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(id, "\n", " "))
	}
	return b.Bytes()
}

// skillFiles renders the built-in skills of caps and owner's active releases, sorted by directory, and their digest.
func (s *Service) skillFiles(owner string, caps []string) ([]skillFile, string, error) {
	var files []skillFile
	err := s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		releases = slices.DeleteFunc(releases, func(r *SkillRelease) bool { return !r.IsActive || r.IsDeleted })
		slices.SortFunc(releases, func(a, b *SkillRelease) int { return strings.Compare(a.SkillKey, b.SkillKey) })
		for _, r := range releases[:min(len(releases), MaxInjectedSkills)] {
			var c *SkillCandidate
			cand := new(SkillCandidate)
			if ok, _ := skillGet(tx, sandboxes.SkillCandidates, r.CandidateID, cand); ok {
				c = cand
			}
			var payload *SkillPayload
			if c != nil && c.PayloadRef != nil {
				if id, err := ParseSkillPayloadRef(*c.PayloadRef); err == nil {
					blob := new(SkillPayload)
					if ok, _ := skillGet(tx, sandboxes.SkillPayloads, id, blob); ok {
						payload = blob
					}
				}
			}
			files = append(files, skillFile{dir: SkillDirName(r.SkillKey), content: renderSkill(r, c, payload)})
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	for _, b := range builtinByCapability {
		if !slices.Contains(caps, b.capability) || slices.ContainsFunc(files, func(f skillFile) bool { return f.dir == b.dir }) {
			continue
		}
		content, err := builtinSkills.ReadFile("builtin_skills/" + b.dir + "/SKILL.md")
		if err != nil {
			return nil, "", fmt.Errorf("reading the built-in skill %s: %w", b.dir, err)
		}
		files = append(files, skillFile{dir: b.dir, content: content})
	}
	slices.SortFunc(files, func(a, b skillFile) int { return strings.Compare(a.dir, b.dir) })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.dir, len(f.content))
		h.Write(f.content)
	}
	return files, hex.EncodeToString(h.Sum(nil)), nil
}

// skillsDir is the profile's skills directory for sandbox sb, "" when its profile injects none.
func (s *Service) skillsDir(sb *sandboxes.Sandbox) string {
	for _, p := range s.cfg.Sandboxes.Profiles() {
		if p.ID == sb.Profile {
			return p.Skills
		}
	}
	return ""
}

// injectSkills brings the skills directory of running sandbox id up to date with its owner's releases. A failure
// is logged and leaves the exec alone: it is tried again at the next one.
func (s *Service) injectSkills(ctx context.Context, id string, t sandboxes.Target) {
	if s.cfg.Skills == nil {
		return
	}
	sb, err := s.cfg.Sandboxes.Get(ctx, id)
	if err != nil || sb == nil || sb.Owner == "" {
		return
	}
	dir := s.skillsDir(sb)
	if dir == "" {
		return
	}
	if err := s.writeSkills(ctx, id, sb.Owner, sb.Capabilities, dir, t); err != nil {
		s.cfg.Logger.Warn("injecting skills into the sandbox", "sandbox", id, "dir", dir, "error", err)
	}
}

func (s *Service) writeSkills(ctx context.Context, id, owner string, caps []string, dir string, t sandboxes.Target) error {
	var rev uint64
	if err := s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) (err error) {
		rev, err = skillRevision(tx)
		return err
	}); err != nil {
		return fmt.Errorf("reading the owner's skills revision: %w", err)
	}
	prev, known := s.injections.get(id)
	if known && prev.rev == rev && prev.dir == dir {
		return nil // nothing changed since the files were written: one read per exec
	}
	files, digest, err := s.skillFiles(owner, caps)
	if err != nil {
		return fmt.Errorf("reading the owner's releases: %w", err)
	}
	if known && prev.digest == digest && prev.dir == dir {
		prev.rev = rev
		s.injections.put(id, prev)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, skillInjectTime)
	defer cancel()
	dirs := make([]string, 0, len(files))
	for _, f := range files {
		p, err := CleanWorkspacePath("skills", dir+"/"+f.dir+"/SKILL.md", false)
		if err != nil {
			return err
		}
		if err := s.cfg.Agent.WriteFile(ctx, t, p, bytes.NewReader(f.content)); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		dirs = append(dirs, f.dir)
	}
	for _, old := range prev.dirs { // skills no longer released (this gateway wrote them)
		if slices.Contains(dirs, old) {
			continue
		}
		if p, err := CleanWorkspacePath("skills", dir+"/"+old, false); err == nil {
			if err := s.cfg.Agent.Remove(ctx, t, p); err != nil && AsError(err).Code != CodeFileNotFound {
				return fmt.Errorf("removing %s: %w", p, err)
			}
		}
	}
	s.injections.put(id, injected{rev: rev, dir: dir, digest: digest, dirs: dirs})
	return nil
}
