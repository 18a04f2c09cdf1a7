package sandboxes

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// OCI runtimes. A profile's `runtime` names the engine's runtime its sandboxes run under: empty is the engine's
// default (runc), runsc is gVisor (docs/security.md "gVisor"), which answers the sandbox's system calls in a kernel
// of its own instead of the host's.

// RuntimeGVisor is gVisor's runtime name, as scripts/prereqs.sh registers it with the engine.
const RuntimeGVisor = "runsc"

// RuntimeDriver is what a Driver offers when it can list its engine's runtimes. The Manager asks for it with a type
// assertion, as for PauseDriver: Start refuses a configuration with a profile whose runtime the engine lacks, rather
// than failing every create of that profile later.
type RuntimeDriver interface {
	// Runtimes lists the runtimes the engine runs containers under (docker info's Runtimes).
	Runtimes(ctx context.Context) ([]string, error)
}

// CheckRuntimes returns a capability_not_supported Error naming the first profile (in order) whose runtime is not in
// have; nil when every profile's runtime is there or names none.
func CheckRuntimes(profiles []Profile, have []string) error {
	for _, p := range profiles {
		if p.Runtime == "" || slices.Contains(have, p.Runtime) {
			continue
		}
		avail := slices.Clone(have)
		sort.Strings(avail)
		hint := "register the runtime with the engine, or remove `runtime` from the profile"
		if p.Runtime == RuntimeGVisor {
			hint = "run scripts/prereqs.sh runsc (it builds gVisor and registers it with the engine), or remove `runtime` from the profile"
		}
		return &Error{Code: CodeCapabilityAbsent,
			Message: fmt.Sprintf("profile %q runs under runtime %q, which the container engine does not have (it has %s)",
				p.ID, p.Runtime, strings.Join(avail, ", ")),
			Hint:    hint,
			Details: map[string]any{"capability": "runtime", "profile": p.ID, "runtime": p.Runtime, "available": avail}}
	}
	return nil
}

// checkRuntimes asks a RuntimeDriver for its runtimes when a profile names one.
func checkRuntimes(ctx context.Context, d Driver, profiles []Profile) error {
	named := slices.ContainsFunc(profiles, func(p Profile) bool { return p.Runtime != "" })
	rd, ok := d.(RuntimeDriver)
	if !named || !ok {
		return nil
	}
	have, err := rd.Runtimes(ctx)
	if err != nil {
		return fmt.Errorf("listing the engine's runtimes: %w", err)
	}
	return CheckRuntimes(profiles, have)
}
