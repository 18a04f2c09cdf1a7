package sandboxroute

import (
	"strings"
	"testing"
)

// TestOriginRule: a site is refused only when it serves the console and apps, whichever route told which; other
// sites and the order they were told in do not change that.
func TestOriginRule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		serves  [][3]any // site, console, apps
		refused string
	}{
		{"both in one route", [][3]any{{"a", true, true}}, "a serves"},
		{"both across routes", [][3]any{{"a", false, true}, {"b", true, false}, {"a", true, false}}, "a serves"},
		{"console only", [][3]any{{"a", true, false}, {"a", false, false}}, ""},
		{"apps on their own site", [][3]any{{"a", true, false}, {"b", false, true}}, ""},
		{"first offender named", [][3]any{{"b", true, true}, {"a", true, true}}, "b serves"},
	} {
		var rule OriginRule
		for _, s := range tc.serves {
			rule.Serves(s[0].(string), s[1].(bool), s[2].(bool))
		}
		err := rule.Err()
		if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.refused) || !strings.Contains(err.Error(), "shared_origin")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
