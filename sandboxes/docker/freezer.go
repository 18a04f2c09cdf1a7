package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The cgroup freezer, driven directly. `docker pause` goes dockerd -> containerd -> a runc process, which costs
// 40-100 ms on a quiet 2-core host and more under load; the kernel freezes or thaws a cgroup in a few milliseconds.
// The driver writes the container's own freezer file (the one runc itself would write) and reads it back, so
// sandboxes resume within a request's budget. What Docker shows for a container frozen this way is its own view:
// it still says running (its paused flag is set only by its own pause), which is why the driver's Inspect and
// List read the freezer and report such a container paused.

// errCgroupUnreachable says the gateway cannot reach this container's cgroup itself (it does not run on the engine
// host as root, the host mounts no such controller, the container's cgroup is not where /proc says): the driver
// then pauses, and reads usage, through the engine.
var errCgroupUnreachable = errors.New("the container's cgroup is not reachable from the gateway")

// cgroupFreezer is one container's freezer: v1's freezer.state, or v2's cgroup.freeze and cgroup.events.
type cgroupFreezer struct {
	dir string // the container's cgroup directory in the freezer hierarchy (v1) or the unified one (v2)
	v2  bool
}

// Freezer states as cgroup v1 spells them (v2's are 0/1, translated).
const (
	stateThawed   = "THAWED"
	stateFreezing = "FREEZING"
	stateFrozen   = "FROZEN"
)

// freezeTimeout bounds how long a freeze may stay FREEZING (a task in an uninterruptible wait, e.g. on a slow
// disk) before it is undone and reported: a half-frozen container must not be recorded paused.
const freezeTimeout = 10 * time.Second

// procCgroup is one line of /proc/<pid>/cgroup: "hierarchy-id:controller,list:/path".
type procCgroup struct {
	controllers []string
	path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup. Bad lines are errors, not skipped: the result decides which
// processes get frozen.
func parseProcCgroup(r io.Reader) ([]procCgroup, error) {
	var out []procCgroup
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("cgroup line %q: no hierarchy id", line)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return nil, fmt.Errorf("cgroup line %q: hierarchy id: %w", line, err)
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("cgroup line %q: no path", line)
		}
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "\x00") {
			return nil, fmt.Errorf("cgroup line %q: path is not absolute", line)
		}
		var list []string
		if ctrls != "" {
			list = strings.Split(ctrls, ",")
		}
		out = append(out, procCgroup{controllers: list, path: path})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading cgroups: %w", err)
	}
	return out, nil
}

// containerCgroup finds a container's cgroup for one controller among its init process's cgroups: the v1 hierarchy
// listing the controller when the host mounts one (mount is that hierarchy's directory under the cgroup root, e.g.
// "freezer" or "cpu,cpuacct"), else the unified hierarchy (mount ""). The path must name the container's id: that
// is what proves the pid read belongs to this container (a gateway in a PID namespace of its own would read some
// other process, and a container's cgroup namespace would show "/"), so nothing outside the container is ever
// frozen or read.
func containerCgroup(cgroups []procCgroup, containerID, controller string) (mount, rel string, err error) {
	if len(containerID) < 12 {
		return "", "", fmt.Errorf("%w: container id %q is too short to match its cgroup", errCgroupUnreachable, containerID)
	}
	pick := func(rel string) (string, error) {
		clean := filepath.Clean(rel)
		if clean != rel || !strings.Contains(filepath.Base(clean), containerID) {
			return "", fmt.Errorf("%w: cgroup %q does not belong to container %s", errCgroupUnreachable, rel, containerID)
		}
		return clean, nil
	}
	var unified string
	for _, c := range cgroups {
		for _, name := range c.controllers {
			if name == controller {
				rel, err := pick(c.path)
				return strings.Join(c.controllers, ","), rel, err
			}
		}
		if len(c.controllers) == 0 {
			unified = c.path
		}
	}
	if unified == "" {
		return "", "", fmt.Errorf("%w: no %s or unified cgroup listed", errCgroupUnreachable, controller)
	}
	rel, err = pick(unified)
	return "", rel, err
}

// freezerPath picks the freezer of a container: the v1 freezer hierarchy when the host mounts one (runc uses it
// there, so `runc state` and a later `docker unpause` agree), else the unified hierarchy on a pure v2 host.
func freezerPath(root string, cgroups []procCgroup, containerID string) (cgroupFreezer, error) {
	mount, rel, err := containerCgroup(cgroups, containerID, "freezer")
	if err != nil {
		return cgroupFreezer{}, err
	}
	return cgroupFreezer{dir: filepath.Join(root, mount, rel), v2: mount == ""}, nil
}

// readProcCgroup reads and parses /proc/<pid>/cgroup.
func readProcCgroup(pid int) ([]procCgroup, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCgroupUnreachable, err)
	}
	defer f.Close()
	cgs, err := parseProcCgroup(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCgroupUnreachable, err)
	}
	return cgs, nil
}

// lookupFreezer finds the freezer of the running container whose init process has the cgroups cgs, under the
// cgroup mount root (normally /sys/fs/cgroup), and checks its control file is there.
func lookupFreezer(root string, cgs []procCgroup, containerID string) (cgroupFreezer, error) {
	fz, err := freezerPath(root, cgs, containerID)
	if err != nil {
		return cgroupFreezer{}, err
	}
	// On a hybrid host the unified hierarchy is mounted at <root>/unified.
	if fz.v2 {
		if _, err := os.Stat(fz.control()); err != nil {
			alt := cgroupFreezer{dir: filepath.Join(root, "unified", strings.TrimPrefix(fz.dir, root)), v2: true}
			if _, err2 := os.Stat(alt.control()); err2 != nil {
				return cgroupFreezer{}, fmt.Errorf("%w: %v", errCgroupUnreachable, err)
			}
			fz = alt
		}
	} else if _, err := os.Stat(fz.control()); err != nil {
		return cgroupFreezer{}, fmt.Errorf("%w: %v", errCgroupUnreachable, err)
	}
	return fz, nil
}

// control is the file a freeze or thaw is written to.
func (f cgroupFreezer) control() string {
	if f.v2 {
		return filepath.Join(f.dir, "cgroup.freeze")
	}
	return filepath.Join(f.dir, "freezer.state")
}

// state reads the freezer's state. v2 reports FREEZING while cgroup.freeze asks for frozen and cgroup.events
// does not yet say so.
func (f cgroupFreezer) state() (string, error) {
	if !f.v2 {
		b, err := os.ReadFile(f.control())
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	want, err := os.ReadFile(f.control())
	if err != nil {
		return "", err
	}
	events, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
	if err != nil {
		return "", err
	}
	frozen := strings.Contains("\n"+string(events), "\nfrozen 1")
	switch {
	case frozen:
		return stateFrozen, nil
	case strings.TrimSpace(string(want)) == "1":
		return stateFreezing, nil
	default:
		return stateThawed, nil
	}
}

func (f cgroupFreezer) write(frozen bool) error {
	v := stateThawed
	switch {
	case f.v2 && frozen:
		v = "1"
	case f.v2:
		v = "0"
	case frozen:
		v = stateFrozen
	}
	// O_WRONLY without O_CREATE: a cgroup that vanished (the container stopped) is an error, never a new file.
	fh, err := os.OpenFile(f.control(), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := fh.WriteString(v)
	cerr := fh.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// freeze freezes every task of the cgroup and returns once the kernel reports it FROZEN. A freeze that does not
// complete (ctx ends, or freezeTimeout passes) is undone: the container is left running, never half frozen.
func (f cgroupFreezer) freeze(ctx context.Context) error {
	deadline := time.Now().Add(freezeTimeout)
	wait := 100 * time.Microsecond
	for {
		// Written every round: on v1 a task forked while the cgroup was FREEZING can keep it there until the
		// state is asked for again (runc does the same).
		if err := f.write(true); err != nil {
			return fmt.Errorf("freezing cgroup %s: %w", f.dir, err)
		}
		st, err := f.state()
		if err != nil {
			return fmt.Errorf("reading freezer state of %s: %w", f.dir, err)
		}
		if st == stateFrozen {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			cause := ctx.Err()
			if cause == nil {
				cause = fmt.Errorf("still %s after %s", st, freezeTimeout)
			}
			if err := f.write(false); err != nil {
				return fmt.Errorf("freezing cgroup %s did not complete (%v), and thawing it again failed: %w", f.dir, cause, err)
			}
			return fmt.Errorf("freezing cgroup %s did not complete: %w", f.dir, cause)
		}
		time.Sleep(wait)
		// At most a millisecond between looks: a freeze is a few milliseconds, and a doubling wait would see it
		// done up to as late again (a fork's source stays frozen, and its caller waits, for that long).
		wait = min(wait*2, time.Millisecond)
	}
}

// thaw thaws the cgroup. The kernel completes a thaw before the write returns (v1) or lets the tasks run at once
// (v2); the state is read back to be sure.
func (f cgroupFreezer) thaw() error {
	if err := f.write(false); err != nil {
		return fmt.Errorf("thawing cgroup %s: %w", f.dir, err)
	}
	st, err := f.state()
	if err != nil {
		return fmt.Errorf("reading freezer state of %s: %w", f.dir, err)
	}
	if st != stateThawed {
		return fmt.Errorf("cgroup %s is still %s after a thaw (a parent cgroup is frozen)", f.dir, st)
	}
	return nil
}
