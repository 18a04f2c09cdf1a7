package sandboxes

import (
	"context"
	"testing"
	"time"
)

func TestStopDuringStartEndsIdle(t *testing.T) {
	m, d, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	d.startDelay = 300 * time.Millisecond
	sb, _ := m.Create(context.Background(), CreateRequest{Profile: "a"})
	time.Sleep(50 * time.Millisecond)
	if err := m.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(context.Background(), sb.ID)
	if got.Status != StatusIdle {
		t.Fatalf("status after stopping a starting sandbox: %+v", got)
	}
	d.startDelay = 0
	mustReady(t, m, sb.ID)
}
