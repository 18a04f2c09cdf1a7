package caddymodule_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// e2bDesktopReport is what testdata/e2b_sdk_desktop.cjs prints.
type e2bDesktopReport struct {
	ID         string `json:"id"`
	Screenshot struct {
		Magic string `json:"magic"`
		Bytes int    `json:"bytes"`
	} `json:"screenshot"`
	Screen      struct{ Width, Height int } `json:"screen"`
	Cursor      struct{ X, Y int }          `json:"cursor"`
	AfterClicks struct{ X, Y int }          `json:"afterClicks"`
	Launched    string                      `json:"launched"`
	Typed       string                      `json:"typed"`
	Cleared     string                      `json:"cleared"`
	Opened      string                      `json:"opened"`
	StreamURL   string                      `json:"streamUrl"`
	StreamTwice string                      `json:"streamTwice"`
	Stream      struct {
		Status int `json:"status"`
		Lit    int `json:"lit"`
	} `json:"stream"`
	AuthStream struct {
		Status int `json:"status"`
		Lit    int `json:"lit"`
	} `json:"authStream"`
	NoKey struct {
		AsksPassword bool   `json:"asksPassword"`
		Status       string `json:"status_text"`
	} `json:"noKey"`
	Fatal string `json:"fatal"`
}

// TestE2BSDKDesktop drives the real npm @e2b/desktop SDK, unmodified, against Caddyfile.example's `desktop`
// template: its create starts Xvfb and XFCE through commands and waits for them; a screenshot is a real PNG; the
// mouse moves and clicks; text typed into a page that Chromium shows (launch) reaches it, as the window title read
// back through xdotool says; xdg-open opens a page; stream.start() runs x11vnc and noVNC in the sandbox and its URL,
// on the port route 6080-{id}.{domain}, opens in real Chromium until noVNC's canvas shows the desktop, also with
// the SDK's password, which noVNC asks for when it is left out.
func TestE2BSDKDesktop(t *testing.T) {
	testenv.ShippedImage(t, "browser")
	_, env, _, _ := e2bExample(t)
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_desktop.cjs"), env...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep e2bDesktopReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)

	if rep.Screenshot.Magic != "89504e470d0a1a0a" || rep.Screenshot.Bytes < 1000 {
		t.Errorf("screenshot: %+v", rep.Screenshot)
	}
	if rep.Screen.Width != 1024 || rep.Screen.Height != 768 {
		t.Errorf("screen size: %+v", rep.Screen)
	}
	if rep.Cursor.X != 100 || rep.Cursor.Y != 120 || rep.AfterClicks.X != 80 || rep.AfterClicks.Y != 80 {
		t.Errorf("mouse: at %+v, after the clicks and the drag %+v", rep.Cursor, rep.AfterClicks)
	}
	if !strings.HasPrefix(rep.Typed, "typed:hello sandgate") || rep.Cleared == "" || rep.Opened == "" || rep.Launched == "" {
		t.Errorf("launch, typing, keys, open: launched %q, typed %q, cleared %q, opened %q", rep.Launched, rep.Typed, rep.Cleared, rep.Opened)
	}
	if !strings.HasPrefix(rep.StreamURL, "https://6080-"+rep.ID+".sandbox.localhost:") || !strings.Contains(rep.StreamURL, "/vnc.html?") {
		t.Errorf("stream URL: %q", rep.StreamURL)
	}
	if rep.StreamTwice != "Stream is already running" {
		t.Errorf("a second stream.start(): %q", rep.StreamTwice)
	}
	if rep.Stream.Status != 200 || rep.Stream.Lit == 0 || rep.AuthStream.Status != 200 || rep.AuthStream.Lit == 0 {
		t.Errorf("the stream in Chromium: %+v, with the password %+v", rep.Stream, rep.AuthStream)
	}
	if !rep.NoKey.AsksPassword {
		t.Errorf("the password stream without its password: noVNC did not ask for it (status %q)", rep.NoKey.Status)
	}
}
