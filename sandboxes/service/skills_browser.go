package service

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
)

// Browser skills: the commands a released browser skill replays (Bay's POST S/browser/skills/{key}/run).

// MaxSkillCommands bounds the commands of one browser skill replay.
const MaxSkillCommands = 1000

// BrowserSkill is the active release of key and the browser commands its candidate's payload holds (Bay's
// POST S/browser/skills/{key}/run replays them): the payload must be a stored blob: object with a non-empty
// "commands" array.
func (s *Service) BrowserSkill(_ context.Context, p Principal, key string) (*SkillRelease, []string, error) {
	owner, err := s.skillOwner(p)
	if err != nil {
		return nil, nil, err
	}
	var rel *SkillRelease
	var cand *SkillCandidate
	var blob *SkillPayload
	var refErr error
	err = s.cfg.Skills.ViewSkills(owner, func(tx sandboxes.SkillTx) error {
		releases, err := skillAll[SkillRelease](tx, sandboxes.SkillReleases)
		if err != nil {
			return err
		}
		for _, r := range releases {
			if r.SkillKey == key && r.IsActive && !r.IsDeleted && (rel == nil || r.Version > rel.Version) {
				rel = r
			}
		}
		if rel == nil {
			return Errorf(CodeNotFound, "No active release found for skill_key: %s", key)
		}
		if cand, err = getCandidate(tx, rel.CandidateID); err != nil {
			return err
		}
		if cand.PayloadRef == nil {
			return nil
		}
		id, err := ParseSkillPayloadRef(*cand.PayloadRef)
		if err != nil {
			refErr = err
			return nil
		}
		blob = new(SkillPayload)
		found, err := skillGet(tx, sandboxes.SkillPayloads, id, blob)
		if err == nil && !found {
			err = Errorf(CodeNotFound, "Artifact blob not found: %s", id)
		}
		return err
	})
	if err != nil {
		return nil, nil, skillWrap(err, "reading a browser skill")
	}
	if refErr != nil {
		return nil, nil, refErr
	}
	if blob == nil {
		return nil, nil, Errorf(CodeValidation, "Candidate payload must be a JSON object")
	}
	var payload map[string]any
	if json.Unmarshal(blob.Payload, &payload) != nil || payload == nil {
		return nil, nil, Errorf(CodeValidation, "Candidate payload must be a JSON object")
	}
	raw, ok := payload["commands"].([]any)
	if !ok {
		return nil, nil, Errorf(CodeValidation, "Candidate payload missing 'commands' array")
	}
	var commands []string
	for _, c := range raw {
		var cmd string
		switch v := c.(type) {
		case string:
			cmd = v
		default:
			b, _ := json.Marshal(v)
			cmd = string(b)
		}
		if strings.TrimSpace(cmd) != "" {
			commands = append(commands, cmd)
		}
	}
	switch {
	case len(commands) == 0:
		return nil, nil, Errorf(CodeValidation, "Candidate payload commands must not be empty")
	case len(commands) > MaxSkillCommands:
		return nil, nil, Errorf(CodeValidation, "a browser skill runs at most %d commands", MaxSkillCommands)
	}
	return rel, commands, nil
}

// MergeSkillTags joins comma-separated tag lists into one, trimmed, unique and sorted (Bay's merge of a replay's
// tags with skill:<key>, release:<id> and stage:<stage>); "" when there are none.
func MergeSkillTags(lists ...string) string {
	var tags []string
	for _, l := range lists {
		for _, t := range strings.Split(l, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	slices.Sort(tags)
	return strings.Join(slices.Compact(tags), ",")
}
