package caddymodule_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// e2bLifecycleReport is what testdata/e2b_sdk_lifecycle.cjs prints.
type e2bLifecycleReport struct {
	Lifecycle struct {
		OnTimeout  string `json:"onTimeout"`
		AutoResume bool   `json:"autoResume"`
	} `json:"lifecycle"`
	ResumableLifecycle struct {
		AutoResume bool `json:"autoResume"`
	} `json:"resumableLifecycle"`
	BgPid              int    `json:"bgPid"`
	PausedAtTimeout    bool   `json:"pausedAtTimeout"`
	ListedPaused       int    `json:"listedPaused"`
	TrafficWhilePaused string `json:"trafficWhilePaused"`
	StillPaused        string `json:"stillPaused"`
	BConnects          string `json:"bConnects"`
	BUpdatesNetwork    string `json:"bUpdatesNetwork"`
	BLogs              int    `json:"bLogs"`
	BLogsV1            int    `json:"bLogsV1"`
	Resumed            struct {
		State     string `json:"state"`
		LifetimeS int    `json:"lifetimeS"`
	} `json:"resumed"`
	BgAlive       bool   `json:"bgAlive"`
	AutoResumed   string `json:"autoResumed"`
	FsOnlyTraffic string `json:"fsOnlyTraffic"`
	FsOnlyFile    string `json:"fsOnlyFile"`
	FsOnlyBgAlive bool   `json:"fsOnlyBgAlive"`
	LogsV2        struct {
		Status int  `json:"status"`
		N      int  `json:"n"`
		Agent  bool `json:"agent"`
	} `json:"logsV2"`
	LogsV1 struct {
		Status  int  `json:"status"`
		Lines   int  `json:"lines"`
		Entries int  `json:"entries"`
		Line    bool `json:"line"`
	} `json:"logsV1"`
	LogsErrorsOnly  bool   `json:"logsErrorsOnly"`
	LogsBackward    int    `json:"logsBackward"`
	LogsBadQuery    int    `json:"logsBadQuery"`
	AfterNetwork    *bool  `json:"afterNetwork"`
	NetworkDenyName string `json:"networkDenyName"`
	NetworkRules    string `json:"networkRules"`
	AfterRefusal    *bool  `json:"afterRefusal"`
	AfterClear      *bool  `json:"afterClear"`
	GoneLogs        int    `json:"goneLogs"`
	NotFoundClass   bool   `json:"notFoundClass"`
	Fatal           string `json:"fatal"`
}

// TestE2BSDKLifecycle drives the real npm e2b SDK, unmodified, on Caddyfile.example with real containers through
// a sandbox's timeout: lifecycle.onTimeout 'pause' freezes it at its TTL (state paused, listed as paused) and
// connect resumes it with a background process still alive and its new timeout; without autoResume traffic does
// not wake it, with autoResume the first command does; keepMemory false stops it at its TTL (files kept,
// processes not). The logs routes answer the container's own output in both versions' shapes, with their query;
// updateNetwork records what the profile enforces and refuses what it cannot with the reason, changing nothing.
// The attacks: owner B's key cannot connect, re-network or read the logs of A's sandbox (not found, as missing).
func TestE2BSDKLifecycle(t *testing.T) {
	_, env, _, _ := e2bExample(t)
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_lifecycle.cjs"), append(env, "OTHER_KEY="+e2bKeyBob)...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep e2bLifecycleReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)
	if rep.Lifecycle.OnTimeout != "pause" || rep.Lifecycle.AutoResume || !rep.ResumableLifecycle.AutoResume {
		t.Errorf("getInfo lifecycle: %+v, resumable %+v", rep.Lifecycle, rep.ResumableLifecycle)
	}
	if !rep.PausedAtTimeout || rep.ListedPaused != 3 {
		t.Errorf("at the timeout: paused %v, listed as paused %d (want 3)", rep.PausedAtTimeout, rep.ListedPaused)
	}
	// The SDK shows the edge's 409 without its body ("sandbox … is paused; resume it with connect").
	if !strings.Contains(rep.TrafficWhilePaused, "409") || rep.StillPaused != "paused" {
		t.Errorf("traffic without autoResume: %q, then %q (want refused, still paused)", rep.TrafficWhilePaused, rep.StillPaused)
	}
	if rep.Resumed.State != "running" || rep.Resumed.LifetimeS < 280 || rep.Resumed.LifetimeS > 310 || !rep.BgAlive || rep.BgPid == 0 {
		t.Errorf("connect after the timeout: %+v, background pid %d alive %v", rep.Resumed, rep.BgPid, rep.BgAlive)
	}
	if rep.AutoResumed != "awake" {
		t.Errorf("autoResume: the first command answered %q", rep.AutoResumed)
	}
	if !strings.Contains(rep.FsOnlyTraffic, "409") || rep.FsOnlyFile != "kept" || rep.FsOnlyBgAlive {
		t.Errorf("keepMemory false: traffic %q, file %q, background process alive %v (want refused, kept, gone)", rep.FsOnlyTraffic, rep.FsOnlyFile, rep.FsOnlyBgAlive)
	}
	if rep.LogsV2.Status != 200 || !rep.LogsV2.Agent || rep.LogsV1.Status != 200 || rep.LogsV1.Lines != 2 || rep.LogsV1.Entries != 2 || !rep.LogsV1.Line {
		t.Errorf("logs: v2 %+v, v1 %+v (want the agent's start line; v1 limit 2)", rep.LogsV2, rep.LogsV1)
	}
	if !rep.LogsErrorsOnly || rep.LogsBackward != 1 || rep.LogsBadQuery != 400 {
		t.Errorf("logs query: level=error only errors %v, backward limit 1 gave %d, bad direction %d", rep.LogsErrorsOnly, rep.LogsBackward, rep.LogsBadQuery)
	}
	if rep.AfterNetwork == nil || *rep.AfterNetwork || !strings.Contains(rep.NetworkDenyName, "egress proxy") || !strings.Contains(rep.NetworkRules, "rules") ||
		rep.AfterRefusal == nil || *rep.AfterRefusal || rep.AfterClear == nil || !*rep.AfterClear {
		t.Errorf("updateNetwork: internet after cutting %v, deny a name %q, rules %q, after the refusals %v, after clearing %v",
			rep.AfterNetwork, rep.NetworkDenyName, rep.NetworkRules, rep.AfterRefusal, rep.AfterClear)
	}
	if !strings.HasPrefix(rep.BConnects, "SandboxNotFoundError") || !strings.HasPrefix(rep.BUpdatesNetwork, "SandboxNotFoundError") || rep.BLogs != 404 || rep.BLogsV1 != 404 {
		t.Errorf("owner B on A's sandbox: connect %q, updateNetwork %q, logs %d / %d (want not found)", rep.BConnects, rep.BUpdatesNetwork, rep.BLogs, rep.BLogsV1)
	}
	if rep.GoneLogs != 404 || !rep.NotFoundClass {
		t.Errorf("after kill: logs %d, connect is SandboxNotFoundError %v", rep.GoneLogs, rep.NotFoundClass)
	}
}

// e2bRestartReport is what testdata/e2b_sdk_restart.cjs prints.
type e2bRestartReport struct {
	ID                string `json:"id"`
	Pid               int    `json:"pid"`
	Paused            bool   `json:"paused"`
	StateAfterRestart string `json:"stateAfterRestart"`
	ResumedState      string `json:"resumedState"`
	BgAlive           bool   `json:"bgAlive"`
	File              string `json:"file"`
	Killed            bool   `json:"killed"`
	Fatal             string `json:"fatal"`
}

func runE2BRestartScript(t *testing.T, env []string) e2bRestartReport {
	t.Helper()
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_restart.cjs"), env...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep e2bRestartReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)
	return rep
}

// TestE2BAutoPauseSurvivesKill: a sandbox its timeout paused (autoPause) stays paused across a gateway killed with
// SIGKILL and started again on the same store, and connect then resumes it with its background process alive and
// its files (the record says paused, the container is frozen: the new gateway keeps it so, it does not adopt and
// probe a frozen agent).
func TestE2BAutoPauseSurvivesKill(t *testing.T) {
	g, env, _, ports := e2bExample(t)
	rep := runE2BRestartScript(t, append(env, "MODE=before"))
	if !rep.Paused || rep.Pid == 0 {
		t.Fatalf("before the crash: %+v", rep)
	}
	example, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	g.Kill()
	g.Restart(string(example))
	https := g.HTTPSClient(t, t.Context(), 5*time.Second)
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		resp, err := https.Get(fmt.Sprintf("https://localhost:%d/e2b/health", ports.https))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the E2B API never answered after the restart: %v\n%s", err, g.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep = runE2BRestartScript(t, append(env, "MODE=after", "ID="+rep.ID, fmt.Sprintf("PID=%d", rep.Pid)))
	if rep.StateAfterRestart != "paused" || rep.ResumedState != "running" || !rep.BgAlive || rep.File != "written before the crash" || !rep.Killed {
		t.Errorf("after a SIGKILL and a restart: %+v (want still paused, then running with its process and file)", rep)
	}
}
