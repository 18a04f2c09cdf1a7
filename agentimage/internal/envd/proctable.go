package envd

import (
	"sync"
	"time"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

const (
	// maxProcs bounds the processes envd tracks (running, plus ended ones kept for endRetention).
	maxProcs = 1024
	// endRetention is how long an ended process can still be connected to for its end event (envd keeps 30 s).
	endRetention = 30 * time.Second
)

// entry is one process started through envd, with the config and tag E2B's List answers.
type entry struct {
	p      *process.Process
	config *pb.ProcessConfig
	tag    string // "" when none
	hasTag bool
}

// procTable maps E2B's selectors (pid, tag) onto the manager's processes.
type procTable struct {
	mu    sync.Mutex
	byPID map[uint32]*entry
}

func newProcTable() *procTable { return &procTable{byPID: map[uint32]*entry{}} }

// reserve says whether one more process may start.
func (t *procTable) full() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byPID) >= maxProcs
}

// add records e and forgets it endRetention after the process ended.
func (t *procTable) add(e *entry) {
	pid := uint32(e.p.PID)
	t.mu.Lock()
	t.byPID[pid] = e
	t.mu.Unlock()
	go func() {
		<-e.p.Done()
		time.AfterFunc(endRetention, func() {
			t.mu.Lock()
			if t.byPID[pid] == e {
				delete(t.byPID, pid)
			}
			t.mu.Unlock()
		})
	}()
}

// find returns the process a selector names; running ones win over ended ones for a tag.
func (t *procTable) find(sel *pb.ProcessSelector) (*entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		e, ok := t.byPID[s.Pid]
		return e, ok
	case *pb.ProcessSelector_Tag:
		var found *entry
		for _, e := range t.byPID {
			if e.hasTag && e.tag == s.Tag && (found == nil || running(e.p)) {
				found = e
			}
		}
		return found, found != nil
	}
	return nil, false
}

// running lists the processes still running, oldest first is not promised (E2B's List has no order).
func (t *procTable) running() []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*entry, 0, len(t.byPID))
	for _, e := range t.byPID {
		if running(e.p) {
			out = append(out, e)
		}
	}
	return out
}

func running(p *process.Process) bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}
