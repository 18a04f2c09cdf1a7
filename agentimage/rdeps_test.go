package main_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// initStep returns the init log's step called name (failing the test when there is none).
func initStep(t *testing.T, sb *testenv.Sandbox, name string) agentapi.InitStep {
	t.Helper()
	var l agentapi.InitLog
	getJSON(t, sb, "/v1/init/log", &l)
	for _, s := range l.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no %q step in the init log %+v", name, l)
	return agentapi.InitStep{}
}

// TestRDependenciesAtCreate: dependencies.r installs from the profile's cran_mirror (a CRAN-like repository the
// test serves) into the workspace library before the r image's sandbox is ready; the R session loads the package at
// once; after a restart the workspace still has it and nothing is installed again.
func TestRDependenciesAtCreate(t *testing.T) {
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	env := customEnv(t, nil, nil,
		&agentapi.Dependencies{R: map[string]string{testenv.RegistryRPackage: ">=1.0"}},
		&agentapi.Mirrors{CRANMirror: reg.CRANURL()})
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "r", Env: env, NoWait: true})
	code, body, seen := waitHealth(t, sb, testenv.WaitLimit)
	if code != http.StatusOK {
		var l agentapi.InitLog
		getJSON(t, sb, "/v1/init/log", &l)
		t.Fatalf("health %d %v; init log %+v", code, body, l)
	}
	t.Logf("ready (health states %v); repository requests %v", seen, reg.Requests())
	step := initStep(t, sb, "r dependencies")
	if step.ExitCode != 0 || !strings.Contains(step.Output, "installing into /workspace/.r-library") || !strings.Contains(step.Output, "R packages ready: sgdemo") {
		t.Fatalf("r dependencies step: %+v", step)
	}
	if !strings.Contains(strings.Join(reg.Requests(), "\n"), "GET /cran/src/contrib/sgdemo_1.0.0.tar.gz") {
		t.Fatalf("the package did not come from the repository: %v", reg.Requests())
	}
	if res := rExec(t, sb, "library(sgdemo)\nsgvalue()\nfind.package('sgdemo')"); !res.Success || !strings.Contains(res.Stdout, "[1] 42") ||
		!strings.Contains(res.Stdout, "/workspace/.r-library/sgdemo") {
		t.Fatalf("the R session and the package: %+v %+v", res, res.Error)
	}
	// A restart (what an idle stop and the next call do) finds the packages in the workspace volume.
	sb.Restart(t)
	before := len(reg.Requests())
	if code, body, _ := waitHealth(t, sb, testenv.WaitLimit); code != http.StatusOK {
		t.Fatalf("after restart: %d %v", code, body)
	}
	if step := initStep(t, sb, "r dependencies"); !strings.Contains(step.Output, "already installed") || len(reg.Requests()) != before {
		t.Fatalf("reinstalled after a restart: %+v %v", step, reg.Requests()[before:])
	}
}

// TestRDependencyFailures: a package the repository lacks and a version it cannot satisfy fail the start with R's
// reasons, one line per package; R dependencies in an image without R say which image has it.
func TestRDependencyFailures(t *testing.T) {
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	env := customEnv(t, []string{"touch /workspace/should-not-run"}, nil,
		&agentapi.Dependencies{R: map[string]string{testenv.RegistryRPackage: ">=2.0", "sgnotthere": ""}},
		&agentapi.Mirrors{CRANMirror: reg.CRANURL()})
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "r", Env: env, NoWait: true})
	code, body, _ := waitHealth(t, sb, testenv.WaitLimit)
	msg, _ := body["error"].(string)
	if code != http.StatusServiceUnavailable || body["status"] != "failed" || !strings.Contains(msg, "installing r dependencies") ||
		!strings.Contains(msg, "R package sgdemo: version 1.0.0 does not satisfy >=2.0") || !strings.Contains(msg, "R package sgnotthere: not installed") {
		t.Fatalf("health %d %v", code, body)
	}
	if out := sb.Exec(t, "ls", "/workspace"); strings.Contains(out, "should-not-run") {
		t.Fatal("init ran after the failed install")
	}

	noR := testenv.RunSandbox(t, testenv.SandboxOptions{Env: customEnv(t, nil, nil, &agentapi.Dependencies{R: map[string]string{"R6": ""}}, nil), NoWait: true})
	code, body, _ = waitHealth(t, noR, testenv.WaitLimit)
	if msg, _ := body["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "needs Rscript") || !strings.Contains(msg, "sandgate/sandbox:r") {
		t.Fatalf("without R: %d %v", code, body)
	}
}
