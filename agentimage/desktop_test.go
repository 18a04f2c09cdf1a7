package main_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// waitCommand runs argv in the sandbox until it exits 0 (what @e2b/desktop's waitAndVerify does), failing after
// testenv.WaitLimit.
func waitCommand(t *testing.T, sb *testenv.Sandbox, argv ...string) string {
	t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		out, code := dockerExec(t, sb, argv...)
		if code == 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never succeeded: exit %d, %s", argv, code, out)
		}
		time.Sleep(200 * time.Millisecond) // polling a state only the sandbox knows
	}
}

// TestDesktopToolsInBrowserImage runs in the browser image what @e2b/desktop 2.4.0 runs through commands on the
// agent's display (docs/e2b.md "Desktop"): its display check, the XFCE session its create waits for, xdotool's
// mouse and keyboard, scrot's screenshot and xrandr.
func TestDesktopToolsInBrowserImage(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "browser", Capabilities: []string{"browser", "vnc"}, Memory: "2g"})
	env := []string{"env", "DISPLAY=:99"}
	sh := func(cmd string) []string { return append(append([]string{}, env...), "sh", "-c", cmd) }

	waitCommand(t, sb, sh("xdpyinfo -display :99 >/dev/null")...)
	// startxfce4 in the background, as the SDK starts it, then the SDK's own readiness check.
	if out, err := exec.Command("docker", "exec", "-d", sb.Name, "env", "DISPLAY=:99", "startxfce4").CombinedOutput(); err != nil {
		t.Fatalf("startxfce4: %v %s", err, out)
	}
	waitCommand(t, sb, sh("pgrep -x xfce4-session >/dev/null && pgrep -x xfwm4 >/dev/null && pgrep -x xfdesktop >/dev/null")...)

	waitCommand(t, sb, sh("xdotool mousemove --sync 100 120")...)
	if out := waitCommand(t, sb, sh("xdotool getmouselocation")...); !strings.Contains(out, "x:100 y:120") {
		t.Fatalf("getmouselocation: %q", out)
	}
	waitCommand(t, sb, sh("xdotool key ctrl+a && xdotool type --delay 10 -- hello && xdotool click 1")...)
	waitCommand(t, sb, sh("scrot --pointer /tmp/shot.png && head -c 4 /tmp/shot.png | od -An -tx1 | grep -q '89 50 4e 47'")...)
	if out := waitCommand(t, sb, sh("xrandr")...); !strings.Contains(out, "Screen 0") {
		t.Fatalf("xrandr: %q", out)
	}
	for _, bin := range []string{"gtk-launch", "xdg-open", "x11vnc", "Xvfb"} {
		waitCommand(t, sb, "sh", "-c", "command -v "+bin)
	}
}
