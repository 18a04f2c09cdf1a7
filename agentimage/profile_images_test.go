package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestProfileImagesBakeRPackages: make profile-images maps dependencies.r to Debian's r-cran-* packages (R6 ->
// r-cran-r6) and checks the result as a sandbox would; a sandbox of the derived image with the same dependencies
// installs nothing (its cran_mirror is a port nothing listens on) and loads the package; a version Debian cannot
// satisfy fails the build and leaves no image.
func TestProfileImagesBakeRPackages(t *testing.T) {
	testenv.Integration(t)
	rImage := testenv.Image(t, "r")
	repo := testenv.Unique("sgprofile")
	dir := t.TempDir()
	profiles := filepath.Join(dir, "profiles.json")
	os.WriteFile(profiles, []byte(`{"profiles":[{"id":"rdemo","image":"`+rImage+`","dependencies":{"r":{"R6":">=2.5"}}}]}`), 0o644)
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), profiles)
	cmd.Env = append(os.Environ(), "SANDGATE_IMAGE_REPO="+repo)
	began := time.Now()
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		_ = exec.Command("docker", "image", "rm", repo+":profile-rdemo", repo+":profile-rtoonew").Run()
	})
	if err != nil || !strings.Contains(string(out), "r-cran-r6") {
		t.Fatalf("profile-images.sh: %v\n%s", err, out)
	}
	t.Logf("derived image built in %s", time.Since(began))

	env := customEnv(t, nil, nil, &agentapi.Dependencies{R: map[string]string{"R6": ">=2.5"}}, &agentapi.Mirrors{CRANMirror: "http://127.0.0.1:9/"})
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Image: repo + ":profile-rdemo", Env: env, HealthTimeout: testenv.WaitLimit})
	if step := initStep(t, sb, "r dependencies"); !strings.Contains(step.Output, "already present: R6 2.5") || strings.Contains(step.Output, "installing") {
		t.Fatalf("r dependencies step in the derived image: %+v", step)
	}
	if res := rExec(t, sb, "Counter <- R6::R6Class('Counter', public = list(n = 0, add = function() { self$n <- self$n + 1; invisible(self) }))\nc <- Counter$new()\nc$add()$add()$n"); !res.Success || !strings.Contains(res.Stdout, "[1] 2") {
		t.Fatalf("R6 in the session: %+v %+v", res, res.Error)
	}

	os.WriteFile(profiles, []byte(`[{"id":"rtoonew","image":"`+rImage+`","dependencies":{"r":{"R6":">=99.0"}}}]`), 0o644)
	cmd = exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), profiles)
	cmd.Env = append(os.Environ(), "SANDGATE_IMAGE_REPO="+repo)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "R package R6: version 2.5.1 does not satisfy >=99.0") {
		t.Fatalf("an unsatisfiable version was accepted: %v\n%s", err, out)
	}
	if exec.Command("docker", "image", "inspect", repo+":profile-rtoonew").Run() == nil {
		t.Fatal("the image that failed its check was kept")
	}
	for _, bad := range []string{`{"system('id')":""}`, `{"R6":"2.5; id"}`} {
		os.WriteFile(profiles, []byte(`[{"id":"x","image":"`+rImage+`","dependencies":{"r":`+bad+`}}]`), 0o644)
		if out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), profiles).CombinedOutput(); err == nil || !strings.Contains(string(out), "bad") {
			t.Fatalf("%s accepted: %v %s", bad, err, out)
		}
	}
}

// TestProfileImagesNodeThroughInterceptingTLS: npm inside docker build trusts only the image's CA bundle, so behind
// a TLS-intercepting proxy it fails where the host's npm works. The test's registry plays that proxy: HTTPS with a
// certificate from a CA only the host knows. Without the CA the build fails with npm's certificate error; with
// SANDGATE_BUILD_CA it succeeds, the package is in the image, and the CA is not.
func TestProfileImagesNodeThroughInterceptingTLS(t *testing.T) {
	testenv.Integration(t)
	base := testenv.Image(t, "base")
	reg := testenv.StartRegistriesTLS(t)
	repo := testenv.Unique("sgprofile")
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	os.WriteFile(profiles, []byte(`[{"id":"nodetls","image":"`+base+`","npm_registry":"`+reg.URL+`/","dependencies":{"node":{"`+testenv.RegistryNodePackage+`":"^1.0.0"}}}]`), 0o644)
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", repo+":profile-nodetls").Run() })
	// Both builders where the docker CLI has buildx (scripts/prereqs.sh buildx), else the legacy one.
	builders := []string{"legacy"}
	if exec.Command("docker", "buildx", "version").Run() == nil {
		builders = append(builders, "buildkit")
	} else {
		t.Log("no docker buildx: the BuildKit path is not exercised (scripts/prereqs.sh buildx installs it)")
	}
	for _, builder := range builders {
		t.Run(builder, func(t *testing.T) { nodeThroughInterceptingTLS(t, builder, reg, repo, profiles) })
	}
}

func nodeThroughInterceptingTLS(t *testing.T, builder string, reg *testenv.Registries, repo, profiles string) {
	run := func(ca string) (string, error) {
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), profiles)
		cmd.Env = append(os.Environ(), "SANDGATE_IMAGE_REPO="+repo, "SANDGATE_BUILD_CA="+ca, "SANDGATE_BUILDER="+builder)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	_ = exec.Command("docker", "image", "rm", repo+":profile-nodetls").Run()
	out, err := run("none")
	if err == nil || !(strings.Contains(out, "SELF_SIGNED_CERT_IN_CHAIN") || strings.Contains(out, "UNABLE_TO_GET_ISSUER_CERT") || strings.Contains(out, "unable to get local issuer certificate") || strings.Contains(out, "self-signed certificate in certificate chain")) {
		t.Fatalf("without the CA the build should fail on the certificate: %v\n%s", err, out)
	}
	if out, err := run(reg.CAFile); err != nil || !strings.Contains(out, "npm trusts "+reg.CAFile) {
		t.Fatalf("with SANDGATE_BUILD_CA: %v\n%s", err, out)
	}
	got, err := exec.Command("docker", "run", "--rm", "--read-only", "--user", "65532:65532", "--entrypoint", "node", repo+":profile-nodetls",
		"-e", "console.log(require('"+testenv.RegistryNodePackage+"').value, require('fs').existsSync('/tmp/sandgate-build-ca.pem'))").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "7 false" {
		t.Fatalf("node package in the derived image (and no CA): %v %s", err, got)
	}
	if !strings.Contains(strings.Join(reg.Requests(), "\n"), "GET /"+testenv.RegistryNodePackage+"/-/") {
		t.Fatalf("the tarball did not come from the TLS registry: %v", reg.Requests())
	}
}
