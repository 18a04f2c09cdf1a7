package caddymodule_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

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
