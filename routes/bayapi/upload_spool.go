package bayapi

import (
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// An upload whose file part comes before its path is spooled to the gateway's temp dir (up to MaxUploadBytes). The
// spool is bounded in concurrency, per owner and overall, so the disk it can take is at most
// MaxSpooledUploads x MaxUploadBytes, and one owner cannot take every slot. Uploads that send the path first are
// streamed to the agent and take no slot.
const (
	DefaultMaxSpooledUploads         = 8
	DefaultMaxSpooledUploadsPerOwner = 2
)

type spoolSlots struct {
	mu       sync.Mutex
	total    int
	perOwner map[string]int
	max      int
	maxOwner int
}

func newSpoolSlots(max, perOwner int) *spoolSlots {
	if max <= 0 {
		max = DefaultMaxSpooledUploads
	}
	if perOwner <= 0 {
		perOwner = DefaultMaxSpooledUploadsPerOwner
	}
	return &spoolSlots{perOwner: map[string]int{}, max: max, maxOwner: min(perOwner, max)}
}

// acquire takes a slot for owner, or answers rate_limited; release it with the returned function.
func (s *spoolSlots) acquire(owner string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total >= s.max || s.perOwner[owner] >= s.maxOwner {
		e := service.Errorf(service.CodeRateLimited, "too many uploads are being spooled; send the path field before the file part to stream the upload instead")
		e.RetryAfter = time.Second
		return nil, e.With("max_spooled_uploads", s.max).With("max_spooled_uploads_per_owner", s.maxOwner)
	}
	s.total++
	s.perOwner[owner]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.perOwner[owner]--; s.perOwner[owner] <= 0 {
				delete(s.perOwner, owner)
			}
		})
	}, nil
}
