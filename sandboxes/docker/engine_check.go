package docker

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Check pings the engine, refuses runc builds vulnerable to CVE-2024-21626, and warns about host settings that
// cap how many sandboxes run well (netcapacity.go).
func (d *Driver) Check(ctx context.Context) ([]string, error) {
	if _, err := d.cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("docker engine at %s does not answer: %w", d.cli.DaemonHost(), err)
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", err)
	}
	runcVersion := ""
	if v, err := d.cli.ServerVersion(ctx); err == nil {
		for _, c := range v.Components {
			if strings.EqualFold(c.Name, "runc") {
				runcVersion = c.Version
			}
		}
	}
	warn, err := CheckRunc(info.RuncCommit.ID, runcVersion)
	if err != nil {
		return nil, err
	}
	var warnings []string
	if warn != "" {
		warnings = append(warnings, warn)
	}
	if err := d.sweepFillContainers(ctx); err != nil { // inject.go
		warnings = append(warnings, err.Error())
	}
	// The host's limits apply to an engine on this host (the gateway runs beside it to police its networks).
	if strings.HasPrefix(d.cli.DaemonHost(), "unix://") {
		if w := CheckNeighbourTable(neighbourLimit()); w != "" {
			warnings = append(warnings, w)
		}
		if err := d.sweepCapped(ctx); err != nil { // workspace_cap.go
			warnings = append(warnings, err.Error())
		}
	}
	return warnings, nil
}

// patchedDistributionBuilds are distribution runc builds older than 1.1.12 that carry the CVE-2024-21626 fix,
// as "upstream version + distribution suffix prefix" -> minimum security revision.
var patchedDistributionBuilds = []struct {
	prefix  string // what the build id starts with
	minimum int    // the first fixed revision
	source  string
}{
	{prefix: "1.1.5+ds1-1+deb12u", minimum: 1, source: "Debian 12 (DSA-5615-1)"},
	{prefix: "1.0.0~rc93+ds1-5+deb11u", minimum: 3, source: "Debian 11 (DSA-5615-1)"},
}

// CheckRunc decides whether a runc build may run sandboxes. commitID is the engine's RuncCommit.ID
// ("v1.1.12-0-g51d5e94", "1.1.5+ds1-1+deb12u1"), version the runc component's version. Upstream 1.1.12 and later
// pass; known distribution builds with the fix backported pass with a warning; anything older is refused.
func CheckRunc(commitID, version string) (warning string, err error) {
	id := strings.TrimPrefix(strings.TrimSpace(commitID), "v")
	for _, b := range patchedDistributionBuilds {
		if rest, ok := strings.CutPrefix(id, b.prefix); ok {
			rev := leadingInt(rest)
			if rev >= b.minimum {
				return fmt.Sprintf("runc %s is older than 1.1.12 but is a %s build carrying the fix for CVE-2024-21626 (Leaky Vessels); accepted", commitID, b.source), nil
			}
			return "", fmt.Errorf("runc %s is a %s build without the fix for CVE-2024-21626 (Leaky Vessels); upgrade runc", commitID, b.source)
		}
	}
	candidates := []string{id, strings.TrimPrefix(strings.TrimSpace(version), "v")}
	for _, c := range candidates {
		major, minor, patch, ok := parseVersion(c)
		if !ok {
			continue
		}
		if major > 1 || (major == 1 && minor > 1) || (major == 1 && minor == 1 && patch >= 12) {
			return "", nil
		}
		return "", fmt.Errorf("runc %s is older than 1.1.12 and vulnerable to CVE-2024-21626 (Leaky Vessels, container escape); upgrade runc before running sandboxes", c)
	}
	return fmt.Sprintf("cannot tell the engine's runc version (%q); make sure it is 1.1.12 or later (CVE-2024-21626)", commitID), nil
}

func leadingInt(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

func parseVersion(s string) (major, minor, patch int, ok bool) {
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end >= 0 {
		s = s[:end]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return 0, 0, 0, false
		}
		n[i] = v
	}
	return n[0], n[1], n[2], true
}

// DataRoot is where the engine keeps its layers and volumes (docker info's DockerRootDir), for the gateway's disk
// warnings; "" for an engine that is not on this host's socket, whose disk the gateway cannot measure.
func (d *Driver) DataRoot(ctx context.Context) (string, error) {
	if !strings.HasPrefix(d.cli.DaemonHost(), "unix://") {
		return "", nil
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("docker info: %w", err)
	}
	return info.DockerRootDir, nil
}

// Runtimes lists the engine's OCI runtimes (docker info's Runtimes: runc, and runsc once scripts/prereqs.sh runsc
// registered it), so the Manager refuses a profile whose runtime is missing (sandboxes.RuntimeDriver).
func (d *Driver) Runtimes(ctx context.Context) ([]string, error) {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", err)
	}
	names := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}
