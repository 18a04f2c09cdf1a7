package sandboxes

import (
	"fmt"
	"path"
	"strings"
)

// Skill injection (off by default): a profile with Skills set gets its owner's released skills (the skills
// lifecycle of sandboxes/service) written into the workspace as <Skills>/<skill>/SKILL.md, one flat directory per
// skill, by the agent as the sandbox user, on the first exec of a sandbox and again when the releases change. The
// files live in the workspace, so they are kept across stop and resume. Ship's convention is /workspace/skills.

// DefaultSkillsDir is the directory of `skills` without an argument, relative to the workspace (Ship's).
const DefaultSkillsDir = "skills"

func (p *Profile) validateSkills() error {
	if p.Skills == "" {
		return nil
	}
	clean := path.Clean(p.Skills)
	if path.IsAbs(p.Skills) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || clean != p.Skills ||
		strings.ContainsAny(p.Skills, "\x00\\") {
		return fmt.Errorf("profile %q: skills %q must be a clean directory relative to the workspace (e.g. %s)", p.ID, p.Skills, DefaultSkillsDir)
	}
	return nil
}
