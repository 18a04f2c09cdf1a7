package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

// The tests that matter most for gVisor run twice: on the engine's default runtime (runc) and on runsc. The
// conformance suite (TestConformanceRunsc), the network isolation tests, pause/resume with the Python kernel and a
// PTY, snapshots and fork all go through eachRuntime; TestGVisorKernelSurface shows what gVisor hides.

// testRuntimes are the runtimes eachRuntime runs a test under: the engine's default, then gVisor.
var testRuntimes = []struct{ name, runtime string }{{"runc", ""}, {"runsc", sandboxes.RuntimeGVisor}}

// eachRuntime runs run as one subtest per runtime; the runsc one skips, saying why, where runsc cannot be
// registered with the engine (make test registers it).
func eachRuntime(t *testing.T, run func(t *testing.T, runtime string)) {
	for _, rt := range testRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			if rt.runtime != "" {
				testenv.Runsc(t)
			}
			run(t, rt.runtime)
		})
	}
}

// runtimeProfile is smallProfile under runtime ("" is the engine's default).
func runtimeProfile(id, runtime string) sandboxes.Profile {
	p := smallProfile(id, "")
	p.Runtime = runtime
	return p
}

// kernelProbe prints, as JSON, what a sandbox's code learns of the kernel under it: its release, how many lines of
// /proc/kallsyms and /proc/modules it reads (-1: absent) and how many symbols have a non-zero address, and what
// io_uring_setup(2) answers (a return value and errno).
const kernelProbe = `
import ctypes, json, os
r = {"release": os.uname().release}
def lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return None
k = lines("/proc/kallsyms")
r["kallsyms"] = -1 if k is None else len(k)
r["kallsyms_addressed"] = 0 if k is None else sum(1 for l in k if l.split()[0].strip("0"))
m = lines("/proc/modules")
r["modules"] = -1 if m is None else len(m)
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
r["io_uring_ret"] = libc.syscall(425, 1, params)
r["io_uring_errno"] = ctypes.get_errno()
print(json.dumps(r))
`

type kernelView struct {
	Release           string `json:"release"`
	Kallsyms          int    `json:"kallsyms"`
	KallsymsAddressed int    `json:"kallsyms_addressed"`
	Modules           int    `json:"modules"`
	IOUringRet        int    `json:"io_uring_ret"`
	IOUringErrno      int    `json:"io_uring_errno"`
}

// TestGVisorKernelSurface: the same probe in a runc and a runsc sandbox of the same image. Under runc the sandbox
// talks to the host's kernel: it reads the host's release, the host's symbol table (names of every kernel
// function, the map an exploit starts from) and the host's loaded modules, and io_uring_setup reaches the host's
// io_uring code. Under gVisor it reads gVisor's own release, no symbol table and no modules, and io_uring_setup is
// answered by gVisor (ENOSYS: gVisor leaves io_uring off), never by the host. The runsc sandbox's files API works
// too (an upload read back through the agent and through the shell).
func TestGVisorKernelSurface(t *testing.T) {
	testenv.Runsc(t)
	var host syscall.Utsname
	if err := syscall.Uname(&host); err != nil {
		t.Fatal(err)
	}
	hostRelease := utsString(host.Release[:])
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{runtimeProfile("plain", ""),
		runtimeProfile("isolated", sandboxes.RuntimeGVisor)}, GCInterval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	plain, isolated := h.create("plain"), h.create("isolated")
	plainAgent, isolatedAgent := h.agent(h.ready(plain.ID)), h.agent(h.ready(isolated.ID))
	if rt := h.inspect(isolated.ID).HostConfig.Runtime; rt != sandboxes.RuntimeGVisor {
		t.Fatalf("the isolated profile's container runs under %q, want runsc", rt)
	}
	probe := func(ag *agentapi.Client) kernelView {
		t.Helper()
		res, err := ag.Exec(ctx, agentapi.ExecRequest{Argv: []string{"python3", "-c", kernelProbe}})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("kernel probe: %+v %v", res, err)
		}
		var v kernelView
		if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
			t.Fatalf("kernel probe's answer %q: %v", res.Stdout, err)
		}
		return v
	}
	runc, gvisor := probe(plainAgent), probe(isolatedAgent)
	t.Logf("runc: %+v", runc)
	t.Logf("runsc: %+v", gvisor)
	hostModules := -1
	if b, err := os.ReadFile("/proc/modules"); err == nil {
		hostModules = len(strings.Split(strings.TrimSpace(string(b)), "\n"))
	}

	// runc: the host's kernel, seen from inside.
	if runc.Release != hostRelease {
		t.Errorf("a runc sandbox reads release %q, want the host's %q", runc.Release, hostRelease)
	}
	if runc.Kallsyms <= 0 {
		t.Errorf("a runc sandbox reads no /proc/kallsyms (%d lines): the comparison shows nothing", runc.Kallsyms)
	}
	if hostModules > 0 && runc.Modules != hostModules {
		t.Errorf("a runc sandbox reads %d lines of /proc/modules, the host has %d", runc.Modules, hostModules)
	}

	// gVisor: its own kernel.
	if !strings.Contains(gvisor.Release, "gvisor") || gvisor.Release == hostRelease {
		t.Errorf("a runsc sandbox reads release %q, want gVisor's (containing \"gvisor\")", gvisor.Release)
	}
	if gvisor.Kallsyms > 0 && gvisor.KallsymsAddressed > 0 {
		t.Errorf("a runsc sandbox reads %d kernel symbols, %d with addresses", gvisor.Kallsyms, gvisor.KallsymsAddressed)
	}
	if gvisor.Kallsyms >= runc.Kallsyms && runc.Kallsyms > 0 {
		t.Errorf("a runsc sandbox reads as much of /proc/kallsyms (%d lines) as a runc one (%d)", gvisor.Kallsyms, runc.Kallsyms)
	}
	if gvisor.Modules > 0 {
		t.Errorf("a runsc sandbox reads %d kernel modules", gvisor.Modules)
	}
	if gvisor.IOUringRet != -1 || syscall.Errno(gvisor.IOUringErrno) != syscall.ENOSYS {
		t.Errorf("io_uring_setup in a runsc sandbox answered %d (errno %d), want gVisor's -1 ENOSYS", gvisor.IOUringRet, gvisor.IOUringErrno)
	}

	// Files under gVisor: the workspace is the same named volume, served through gVisor's file proxy.
	const body = "written through the agent under gVisor\n"
	if _, err := isolatedAgent.Upload(ctx, "/workspace/gvisor.txt", strings.NewReader(body), agentapi.UploadOptions{Size: int64(len(body))}); err != nil {
		t.Fatalf("upload: %v", err)
	}
	dl, err := isolatedAgent.Download(ctx, "/workspace/gvisor.txt", agentapi.DownloadOptions{})
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got, err := io.ReadAll(dl.Body)
	dl.Body.Close()
	if err != nil || string(got) != body {
		t.Fatalf("download: %q %v", got, err)
	}
	if out, err := h.exec(isolated.ID, "cat", "/workspace/gvisor.txt"); err != nil || out != body {
		t.Fatalf("the shell reads %q (%v)", out, err)
	}
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// TestEngineRefusesMissingRuntime: on the real engine, a profile naming a runtime the engine does not have stops the
// gateway at Start with capability_not_supported naming it and listing what the engine has (runc among them).
func TestEngineRefusesMissingRuntime(t *testing.T) {
	testenv.Integration(t)
	drv, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique("sgrt")
	testenv.RemoveNamespace(t, ns)
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: ns}, drv, sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "store.db")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	p := runtimeProfile("isolated", "sandgate-no-such-runtime")
	p.Image = testenv.Image(t, "base")
	ctx := context.Background()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{p}}); err != nil {
		t.Fatal(err)
	}
	err = mgr.Start(ctx)
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeCapabilityAbsent || se.Details["runtime"] != "sandgate-no-such-runtime" {
		t.Fatalf("Start: want capability_not_supported naming the runtime, got %v", err)
	}
	if avail, _ := se.Details["available"].([]string); !slices.Contains(avail, "runc") {
		t.Fatalf("the refusal lists the engine's runtimes as %v, want runc among them", se.Details["available"])
	}
}
