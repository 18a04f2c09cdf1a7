package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The Manager's names and labels were made for Docker, which takes nearly any string. Kubernetes names must be
// DNS labels and label values are short and restricted, while owners and workspace names come from callers. So
// every name and label is mapped deterministically onto a valid one (the same input always gives the same object),
// and the exact values ride in annotations, which is what the driver reports back and filters on.

const (
	annoPrefix = "sandgate.dev/"
	// annoLabels holds the exact labels the Manager gave, as JSON.
	annoLabels = annoPrefix + "labels"
	// annoName holds the exact name the Manager gave (container or volume name).
	annoName = annoPrefix + "name"
	// annoStopping marks a Pod the driver deletes on purpose: its end is no death.
	annoStopping = annoPrefix + "stopping"
	// labelContainer selects one container record's Pod (the NetworkPolicy's pod selector).
	labelContainer = annoPrefix + "container"
	// labelManagedBy marks everything the driver makes.
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedByValue = "sandgate"
	// podKey is the container record's data key holding the Pod as JSON.
	podKey = "pod.json"
)

// objectName maps a Manager name onto a DNS label: the name itself when it is one, else a cleaned prefix and a
// hash of the whole name.
func objectName(s string) string {
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
	return clean + "-" + shortHash(s)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

func validLabelKey(k string) bool   { return len(validation.IsQualifiedName(k)) == 0 }
func validLabelValue(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 }

func validateName(s string) string { return strings.Join(validation.IsDNS1123Label(s), "; ") }

// labelValue maps a value onto a valid label value: itself when it is one, else "h-" and a hash.
func labelValue(v string) string {
	if validLabelValue(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

// objectLabels are the Kubernetes labels standing for the Manager's labels: keys that cannot be label keys are
// left to the annotation.
func objectLabels(in map[string]string) map[string]string {
	out := map[string]string{labelManagedBy: managedByValue}
	for k, v := range in {
		if validLabelKey(k) {
			out[k] = labelValue(v)
		}
	}
	return out
}

// objectAnnotations carry the exact labels and name.
func objectAnnotations(name string, in map[string]string) map[string]string {
	b, _ := json.Marshal(in) // a map of strings always marshals
	return map[string]string{annoLabels: string(b), annoName: name}
}

// exactLabels reads the Manager's labels back from an object's annotations.
func exactLabels(annotations map[string]string) map[string]string {
	out := map[string]string{}
	if s := annotations[annoLabels]; s != "" {
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return map[string]string{}
		}
	}
	return out
}

// selectorFor is the label selector narrowing a List to candidates for match (values "" match any value); the
// exact match is checked on the annotation afterwards (matches).
func selectorFor(match map[string]string) string {
	set := labels.Set{labelManagedBy: managedByValue}
	var parts []string
	for k, v := range match {
		if !validLabelKey(k) {
			continue
		}
		if v == "" {
			parts = append(parts, k)
			continue
		}
		set[k] = labelValue(v)
	}
	sel := labels.SelectorFromSet(set).String()
	for _, p := range parts {
		sel += "," + p
	}
	return sel
}

// matches reports whether exact carries every label of match ("" matches any value, but the key must be there).
func matches(exact, match map[string]string) bool {
	for k, v := range match {
		got, ok := exact[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

func parseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or CIDR")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
