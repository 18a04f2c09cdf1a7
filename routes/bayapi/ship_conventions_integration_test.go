package bayapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// Ship's conventions as profile options (sandboxes/profile_ship.go), checked as Shipyard Neo's own integration
// suite checks them against its Ship image (pkgs/bay/tests/integration: isolation/test_container.py, the profile
// env tests, the browser workflow), through Bay's API on a real gateway with our images. The shipyard-neo SDK
// sends these same requests (POST /v1/sandboxes, shell/exec, python/exec, browser/exec); it cannot be installed
// here (its registry is out of reach), so the requests are made with our client.

// shipProfiles are a Ship-like profile, the same without its options (our defaults), and a Ship + Gull one.
func shipProfiles(base, browser string) string {
	return fmt.Sprintf(`
		profile ship {
			image %[1]s
			capabilities filesystem shell python
			env BAY_TEST_ENV_VAR test-value-12345
			env TRICKY "it's $HOME & \"more\""
			user shipyard 1000
			home /workspace
			env_file /workspace/.bay_env.sh
		}
		profile plain {
			image %[1]s
			capabilities filesystem shell python
			env BAY_TEST_ENV_VAR test-value-12345
		}
		profile browser-python {
			image %[2]s
			capabilities filesystem shell python browser
			memory 1g
			user shipyard 1000
			home /workspace
			host_aliases ship
		}`, base, browser)
}

func startShipGateway(t *testing.T, withBrowser bool) (*gateway, *client.Client) {
	t.Helper()
	base, browser := bayBaseImage(t), "none"
	if withBrowser {
		browser = testenv.Image(t, "browser")
	}
	g := startGateway(t, "api_key sk-ship", nil, false, func(c string) string {
		return strings.Replace(c, "start_timeout 60s", "start_timeout 60s"+shipProfiles(base, browser), 1)
	})
	return g, client.New(g.url, "sk-ship")
}

func createReady(ctx context.Context, t *testing.T, c *client.Client, profile string) string {
	t.Helper()
	sb, err := c.CreateSandbox(ctx, profile, 600)
	if err != nil {
		t.Fatalf("create %s: %v", profile, err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, 100*time.Millisecond); err != nil {
		t.Fatalf("%s never ready: %v", profile, err)
	}
	return sb.ID
}

func shell(ctx context.Context, t *testing.T, c *client.Client, id, cmd string) string {
	t.Helper()
	res, err := c.Shell(ctx, id, cmd, 60)
	if err != nil {
		t.Fatalf("shell %q: %v", cmd, err)
	}
	if !res.Success {
		t.Fatalf("shell %q failed (exit %d): %s %v", cmd, res.ExitCode, res.Output, res.Error)
	}
	return strings.TrimSpace(res.Output)
}

// TestShipConventions: a profile with user shipyard 1000, HOME /workspace and the env file runs commands as Ship's do,
// keeps it across stop and start, and a profile without the options keeps our defaults.
func TestShipConventions(t *testing.T) {
	_, c := startShipGateway(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := createReady(ctx, t, c, "ship")

	check := func(t *testing.T) {
		t.Helper()
		for cmd, want := range map[string]string{
			"whoami":                            "shipyard",
			"id -u; id -g; id -un; id -gn":      "1000\n1000\nshipyard\nshipyard",
			"echo $HOME; echo $USER; cd ~; pwd": "/workspace\nshipyard\n/workspace",
			"grep -c '^shipyard:x:1000:1000::/workspace:' /etc/passwd": "1",
			// The workspace is the user's: it can write there, and what it writes is its own.
			"touch /workspace/mine && stat -c '%u %U' /workspace/mine /workspace": "1000 shipyard\n1000 shipyard",
			"pnpm --version": "9.15.9",
			// Shipyard Neo's test_profile_env_file_created and its shell sourcing: the file holds the profile's env,
			// and sourcing it gives the values back exactly.
			`env -i bash -c '. /workspace/.bay_env.sh && printf "%s|%s" "$BAY_TEST_ENV_VAR" "$TRICKY"'`: `test-value-12345|it's $HOME & "more"`,
			"echo $BAY_TEST_ENV_VAR": "test-value-12345",
		} {
			if got := shell(ctx, t, c, id, cmd); got != want {
				t.Errorf("%s:\n got %q\nwant %q", cmd, got, want)
			}
		}
		py, err := c.Python(ctx, id, "import os, getpass, pwd\nprint(os.getcwd(), getpass.getuser(), pwd.getpwuid(os.getuid()).pw_name, os.environ['HOME'], os.environ.get('BAY_TEST_ENV_VAR'), 'shipyard' in open('/etc/passwd').read())", 60)
		if err != nil || !py.Success {
			t.Fatalf("python: %+v %v", py, err)
		}
		if got := strings.TrimSpace(py.Output); got != "/workspace shipyard shipyard /workspace test-value-12345 True" {
			t.Errorf("python sees %q", got)
		}
	}
	t.Run("created", check)

	// The sandbox's code cannot change who it is: /etc/passwd is a read-only mount, and the env file's name
	// pointed at another file is replaced at the next start, not written through.
	t.Run("attacks", func(t *testing.T) {
		res, err := c.Shell(ctx, id, "echo 'shipyard:x:0:0::/workspace:/bin/bash' >> /etc/passwd", 30)
		if err != nil || res.Success {
			t.Errorf("writing /etc/passwd: %+v %v", res, err)
		}
		shell(ctx, t, c, id, "echo keep > /workspace/target && rm /workspace/.bay_env.sh && ln -s /workspace/target /workspace/.bay_env.sh")
	})
	if err := c.Do(ctx, "POST", "/v1/sandboxes/"+id+"/stop", nil, nil); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Run("after stop and start", func(t *testing.T) {
		check(t)
		if got := shell(ctx, t, c, id, "cat /workspace/target; test -L /workspace/.bay_env.sh && echo link || echo file"); got != "keep\nfile" {
			t.Errorf("the env file's link was written through: %q", got)
		}
	})

	t.Run("defaults unchanged", func(t *testing.T) {
		plain := createReady(ctx, t, c, "plain")
		want := "sandbox 65532 /home/sandbox\nnone"
		if got := shell(ctx, t, c, plain, "echo $(whoami) $(id -u) $HOME; ls /workspace/.bay_env.sh 2>/dev/null || echo none"); got != want {
			t.Errorf("a profile without the options: %q, want %q", got, want)
		}
	})
}

// TestShipHostAlias is Shipyard Neo's browser workflow: the Ship side serves a page from /workspace on port 9000 and
// the browser opens it as http://ship:9000. Our browser profile is one sandbox (Ship and Gull in one container), so
// `ship` names the sandbox itself.
func TestShipHostAlias(t *testing.T) {
	_, c := startShipGateway(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := createReady(ctx, t, c, "browser-python")
	shell(ctx, t, c, id, `mkdir -p site && printf '<html><head><title>ship-page</title></head><body>hi</body></html>' > site/index.html`)
	shell(ctx, t, c, id, "cd site && nohup python3 -m http.server 9000 --bind 0.0.0.0 >/dev/null 2>&1 &")
	// The server is up when the sandbox's own resolver maps ship and the port answers (observable, not timed).
	if got := shell(ctx, t, c, id, "getent hosts ship | awk '{print $1}'"); got != "127.0.0.1" {
		t.Fatalf("ship resolves to %q", got)
	}
	shell(ctx, t, c, id, "for i in $(seq 200); do curl -fsS -o /dev/null http://ship:9000/ && exit 0; sleep 0.1; done; exit 1")
	var step struct {
		Success bool   `json:"success"`
		Output  string `json:"output"`
		Error   string `json:"error"`
	}
	for _, cmd := range []string{"open http://ship:9000/index.html", "get title"} {
		if err := c.Do(ctx, "POST", "/v1/sandboxes/"+id+"/browser/exec", map[string]any{"cmd": cmd, "timeout": 60}, &step); err != nil {
			t.Fatalf("browser %q: %v", cmd, err)
		}
		if !step.Success {
			t.Fatalf("browser %q: %+v", cmd, step)
		}
	}
	if !strings.Contains(step.Output, "ship-page") {
		t.Errorf("the page's title is %q", step.Output)
	}
	if got := shell(ctx, t, c, id, "whoami; pnpm --version"); got != "shipyard\n9.15.9" {
		t.Errorf("browser sandbox: %q", got)
	}
}
