package sandboxes

import "testing"

func TestProfileSkillsDir(t *testing.T) {
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{"", true}, {"skills", true}, {"agent/skills", true}, {".skills", true},
		{"/workspace/skills", false}, {"../skills", false}, {"..", false}, {".", false}, {"a/../b", false},
		{"skills/", false}, {"a\\b", false}, {"a\x00b", false},
	} {
		p := Profile{ID: "p", Skills: tc.dir}
		if err := p.validateSkills(); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.dir, err, tc.ok)
		}
	}
}
