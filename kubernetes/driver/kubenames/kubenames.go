// Package kubenames maps the Manager's names and labels onto valid Kubernetes ones, and back.
//
// The Manager's names and labels were made for Docker, which takes nearly any string. Kubernetes names must be DNS
// labels and label values are short and restricted, while owners and workspace names come from callers. So every
// name and label is mapped deterministically onto a valid one (the same input always gives the same object), and
// the exact values ride in annotations, which is what the driver reports back and filters on.
//
// It is a package of its own, needing only apimachinery's validation, because its functions parse tenant input and
// have fuzz targets: fuzzing instruments every package the test links, and the driver links all of client-go.
package kubenames

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// Prefix starts every label and annotation key of the driver's own.
	Prefix = "sandgate.dev/"
	// AnnoLabels holds the exact labels the Manager gave, as JSON.
	AnnoLabels = Prefix + "labels"
	// AnnoName holds the exact name the Manager gave (container or volume name).
	AnnoName = Prefix + "name"
	// LabelManagedBy marks everything the driver makes, with the value ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "sandgate"
)

// Object maps a Manager name onto a DNS label: the name itself when it is one, else a cleaned prefix and a hash of
// the whole name.
func Object(s string) string {
	if len(validation.IsDNS1123Label(s)) == 0 {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	clean := b.String()
	if len(clean) > 50 {
		clean = clean[:50]
	}
	clean = strings.Trim(clean, "-")
	if clean == "" {
		clean = "x"
	}
	return clean + "-" + ShortHash(s)
}

// ShortHash is 12 hex digits of s's SHA-256: a suffix that keeps mapped names apart.
func ShortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// ValidLabelKey reports whether k is a valid label key.
func ValidLabelKey(k string) bool { return len(validation.IsQualifiedName(k)) == 0 }

// ValidLabelValue reports whether v is a valid label value.
func ValidLabelValue(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 }

// Validate says why s is not a DNS label, or "" when it is one.
func Validate(s string) string { return strings.Join(validation.IsDNS1123Label(s), "; ") }

// LabelValue maps a value onto a valid label value: itself when it is one, else "h-" and a hash.
func LabelValue(v string) string {
	if ValidLabelValue(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

// Labels are the Kubernetes labels standing for the Manager's labels: keys that cannot be label keys are left to
// the annotation.
func Labels(in map[string]string) map[string]string {
	out := map[string]string{LabelManagedBy: ManagedBy}
	for k, v := range in {
		if ValidLabelKey(k) {
			out[k] = LabelValue(v)
		}
	}
	return out
}

// Annotations carry the exact labels and name.
func Annotations(name string, in map[string]string) map[string]string {
	b, _ := json.Marshal(in) // a map of strings always marshals
	return map[string]string{AnnoLabels: string(b), AnnoName: name}
}

// ExactLabels reads the Manager's labels back from an object's annotations.
func ExactLabels(annotations map[string]string) map[string]string {
	out := map[string]string{}
	if s := annotations[AnnoLabels]; s != "" {
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return map[string]string{}
		}
	}
	return out
}

// Selector is the label selector narrowing a List to candidates for match (values "" match any value); the exact
// match is checked on the annotation afterwards (Matches).
func Selector(match map[string]string) string {
	set := labels.Set{LabelManagedBy: ManagedBy}
	var parts []string
	for k, v := range match {
		if !ValidLabelKey(k) {
			continue
		}
		if v == "" {
			parts = append(parts, k)
			continue
		}
		set[k] = LabelValue(v)
	}
	sel := labels.SelectorFromSet(set).String()
	for _, p := range parts {
		sel += "," + p
	}
	return sel
}

// Matches reports whether exact carries every label of match ("" matches any value, but the key must be there).
func Matches(exact, match map[string]string) bool {
	for k, v := range match {
		got, ok := exact[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}
