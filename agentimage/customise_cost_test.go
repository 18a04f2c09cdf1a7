package main_test

import (
	"net/http"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestCustomiseCreateCost measures what each customisation adds to the time from `docker run` to a 200 from
// /health, as a ratio to a plain sandbox of the same image measured in the same run. It asserts nothing about speed;
// run it by hand: SANDGATE_MEASURE=1 go test -run TestCustomiseCreateCost -v ./agentimage/
func TestCustomiseCreateCost(t *testing.T) {
	if os.Getenv("SANDGATE_MEASURE") == "" {
		t.Skip("measurement: set SANDGATE_MEASURE=1")
	}
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	mirrors := &agentapi.Mirrors{NPMRegistry: reg.URL + "/", PyPIIndexURL: reg.URL + "/simple/"}
	cases := []struct {
		name string
		env  []string
	}{
		{"plain", nil},
		{"mirrors", customEnv(t, nil, nil, nil, mirrors)},
		{"init (one command)", customEnv(t, []string{"echo hi > /workspace/x"}, nil, nil, nil)},
		{"python dependency", customEnv(t, nil, nil, &agentapi.Dependencies{Python: map[string]string{testenv.RegistryPyPackage: "1.0.0"}}, mirrors)},
		{"node dependency", customEnv(t, nil, nil, &agentapi.Dependencies{Node: map[string]string{testenv.RegistryNodePackage: "1.0.0"}}, mirrors)},
		{"service with port", customEnv(t, nil, []agentapi.ServiceSpec{{Name: "web", Command: "exec python3 -m http.server $PORT", Port: 8000}}, nil, nil)},
	}
	const rounds = 3
	medians := map[string]time.Duration{}
	for _, c := range cases {
		var runs []time.Duration
		for i := 0; i < rounds; i++ {
			began := time.Now()
			sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "node", Env: c.env, NoWait: true})
			code, _, _ := waitHealth(t, sb, 3*time.Minute)
			if code != http.StatusOK {
				t.Fatalf("%s: health %d", c.name, code)
			}
			runs = append(runs, time.Since(began))
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
		medians[c.name] = runs[rounds/2]
		t.Logf("%-20s median %6d ms  x%.2f of plain", c.name, medians[c.name].Milliseconds(), float64(medians[c.name])/float64(medians["plain"]))
	}
}
