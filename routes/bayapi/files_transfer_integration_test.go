package bayapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestFilesTransferAgainstGateway: a file written in a Python sandbox, exported, is imported byte for byte into a
// Node sandbox of the same owner through the real gateway; another owner's sandbox cannot import it, and a path that
// was not exported is refused.
func TestFilesTransferAgainstGateway(t *testing.T) {
	testenv.Integration(t)
	nodeImage := testenv.Image(t, "node")
	g := startGateway(t, "key sk-alice alice", nil, true, func(cf string) string {
		return strings.Replace(cf, "start_timeout 60s", `start_timeout 60s
		profile node-default {
			image `+nodeImage+`
			capabilities filesystem shell node
			memory 512m
		}`, 1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	alice, bob := client.New(g.url, "sk-alice"), client.New(g.url, "sk-bob")
	create := func(c *client.Client, profile string) string {
		sb, err := c.CreateSandbox(ctx, profile, 3600)
		if err != nil {
			t.Fatalf("create %s: %v", profile, err)
		}
		if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
			t.Fatalf("%s never ready: %v", profile, err)
		}
		return sb.ID
	}
	py, node, bobs := create(alice, "python-default"), create(alice, "node-default"), create(bob, "python-default")

	payload := make([]byte, 200<<10)
	rand.Read(payload)
	if _, err := alice.Upload(ctx, py, "out/data.bin", bytes.NewReader(payload)); err != nil {
		t.Fatalf("upload: %v", err)
	}
	var exp map[string]any
	if err := alice.Do(ctx, http.MethodPost, "/v1/sandboxes/"+py+"/files:export", map[string]any{"paths": []string{"out/data.bin"}}, &exp); err != nil {
		t.Fatalf("export: %v", err)
	}
	began := time.Now()
	var imp map[string]any
	if err := alice.Do(ctx, http.MethodPost, "/v1/sandboxes/"+node+"/files:import",
		map[string]any{"from_sandbox": py, "path": "out/data.bin", "destination": "in/data.bin"}, &imp); err != nil {
		t.Fatalf("import: %v", err)
	}
	t.Logf("imported %v bytes in %s", imp["size"], time.Since(began))
	resp, err := alice.Download(ctx, node, "in/data.bin", "")
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, payload) {
		t.Fatalf("imported %d bytes differ from the %d exported", len(got), len(payload))
	}

	// The Node sandbox's kernel reads the imported file; its state persists between calls through the API.
	var n1, n2 map[string]any
	if err := alice.Do(ctx, http.MethodPost, "/v1/sandboxes/"+node+"/node/exec",
		map[string]any{"code": "const buf = require('fs').readFileSync('in/data.bin'); buf.length"}, &n1); err != nil {
		t.Fatalf("node exec: %v", err)
	}
	if err := alice.Do(ctx, http.MethodPost, "/v1/sandboxes/"+node+"/node/exec",
		map[string]any{"code": "await new Promise(r => setTimeout(() => r(buf[0] + buf[1]), 10))"}, &n2); err != nil {
		t.Fatalf("node exec: %v", err)
	}
	if n1["success"] != true || n1["output"] != "204800" || n2["output"] != fmt.Sprint(int(payload[0])+int(payload[1])) {
		t.Fatalf("node exec answers: %v / %v", n1, n2)
	}

	err = bob.Do(ctx, http.MethodPost, "/v1/sandboxes/"+bobs+"/files:import", map[string]any{"from_sandbox": py, "path": "out/data.bin"}, nil)
	if code(err) != "not_found" {
		t.Fatalf("another owner importing: %v", err)
	}
	err = alice.Do(ctx, http.MethodPost, "/v1/sandboxes/"+node+"/files:import", map[string]any{"from_sandbox": py, "path": "out/other.bin"}, nil)
	if code(err) != "forbidden" {
		t.Fatalf("importing what was not exported: %v", err)
	}
}
