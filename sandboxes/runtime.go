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

// refusedUnderRuntime refuses, with a capability_not_supported Error naming the capability, the profile settings
// that cannot work under the profile's runtime. Each was checked on the real engine (docs/security.md, "Refused
// under gVisor"); refusing at configuration beats sandboxes that never become ready or lose their network later.
func (p *Profile) refusedUnderRuntime() error {
	refuse := func(capability, why string) error {
		return &Error{Code: CodeCapabilityAbsent,
			Message: fmt.Sprintf("profile %q: %s does not work under runtime %s: %s", p.ID, capability, p.Runtime, why),
			Hint:    "remove `runtime` from the profile (runc), or the setting",
			Details: map[string]any{"capability": capability, "profile": p.ID, "runtime": p.Runtime}}
	}
	if p.Runtime == "" || p.Runtime == "runc" {
		return nil
	}
	if p.NetworkSpares > 0 {
		if p.Runtime == RuntimeGVisor {
			// TestGVisorStripsAJoinedNamespace: runsc moves the addresses of the namespace it joins into its own
			// network stack and deletes them from the interface, so a holder's namespace has none left after the
			// sandbox's first stop, and the sandbox would start again with no network.
			return refuse("network_spares", "gVisor takes the addresses of the network namespace it joins off its "+
				"interface, so a sandbox restarted in its held namespace would have no network")
		}
		return refuse("network_spares", "a spare is a namespace held for runc sandboxes; other runtimes are untested with it")
	}
	if p.Network == NetworkNone && p.Runtime == RuntimeGVisor {
		// TestGVisorKeepsUnixSocketsInside: a Unix socket bound in the sandbox, on the host directory mounted for
		// it, lives only in gVisor's kernel; the host cannot connect to it (runsc's --host-uds is off, and turning
		// it on would let every sandbox make host sockets in its mounts). network none's agent listens only there.
		return refuse("network none", "the agent of a network none sandbox listens on a Unix socket in a host "+
			"directory, and gVisor keeps sockets bound in a sandbox inside its own kernel, where the gateway cannot connect")
	}
	return nil
}
