package kubenames

import (
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"
)

func TestObject(t *testing.T) {
	cases := map[string]bool{ // input -> kept as is
		"sg-abc123": true, "sandbox-1": true,
		"sg-Work_Space": false, "UPPER": false, "": false, "-lead": false, "a.b": false,
		"a-very-long-name-that-is-longer-than-sixty-three-characters-in-total-x": false,
	}
	for in, same := range cases {
		got := Object(in)
		if (got == in) != same {
			t.Errorf("Object(%q) = %q, kept %v, want %v", in, got, got == in, same)
		}
		if msg := Validate(got); msg != "" {
			t.Errorf("Object(%q) = %q is not a DNS label: %s", in, got, msg)
		}
		if Object(in) != got {
			t.Errorf("Object(%q) is not deterministic", in)
		}
	}
	if Object("sg-A") == Object("sg-a_") {
		t.Error("two names that clean to one prefix collide")
	}
}

// TestSelectorAndMatch checks List's two steps: the label selector narrows on hashed values, the annotation
// decides exactly.
func TestSelectorAndMatch(t *testing.T) {
	exact := map[string]string{"sg.managed": "true", "sg.owner": "alice@example.com", "sg.id": "x1"}
	lbls := labels.Set(Labels(exact))
	for _, tc := range []struct {
		match map[string]string
		want  bool
	}{
		{map[string]string{"sg.managed": "true"}, true},
		{map[string]string{"sg.owner": "alice@example.com"}, true},
		{map[string]string{"sg.owner": "bob@example.com"}, false},
		{map[string]string{"sg.id": ""}, true},
		{map[string]string{"sg.workspace": ""}, false},
		{map[string]string{"sg.managed": "true", "sg.id": "x2"}, false},
	} {
		sel, err := labels.Parse(Selector(tc.match))
		if err != nil {
			t.Fatalf("selector %q: %v", Selector(tc.match), err)
		}
		if got := sel.Matches(lbls) && Matches(exact, tc.match); got != tc.want {
			t.Errorf("match %v: %v, want %v", tc.match, got, tc.want)
		}
	}
}

// FuzzObject: any name a caller can give maps onto a valid, stable Kubernetes name.
func FuzzObject(f *testing.F) {
	for _, s := range []string{"sg-abc", "sg-Work_Space", "", "ü", "a/b/../c", "x\x00y", "--", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Object(s)
		if msg := Validate(got); msg != "" {
			t.Fatalf("Object(%q) = %q: %s", s, got, msg)
		}
		if Object(s) != got {
			t.Fatalf("Object(%q) not stable", s)
		}
	})
}

// FuzzLabels: any label values (owners, workspace names) give valid labels and come back exactly.
func FuzzLabels(f *testing.F) {
	for _, s := range []string{"alice@example.com", "2026-11-24T16:00:00Z", "", "a b", string(make([]byte, 100))} {
		f.Add("sg.owner", s)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		if !utf8.ValidString(key) || !utf8.ValidString(value) {
			t.Skip("the Manager's labels come from JSON and Go strings it made: always UTF-8")
		}
		in := map[string]string{key: value}
		for k, v := range Labels(in) {
			if !ValidLabelKey(k) || !ValidLabelValue(v) {
				t.Fatalf("invalid label %q=%q from %q=%q", k, v, key, value)
			}
		}
		back := ExactLabels(Annotations("n", in))
		if back[key] != value {
			t.Fatalf("label %q=%q came back as %q", key, value, back[key])
		}
		if _, err := labels.Parse(Selector(in)); err != nil {
			t.Fatalf("selector for %q=%q: %v", key, value, err)
		}
	})
}
