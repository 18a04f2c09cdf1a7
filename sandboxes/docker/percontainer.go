package docker

import "sync"

// perContainer remembers one value per container id: its freezer (pause.go), where its usage is read from and its
// last CPU sample (usage.go, usage_cgroup.go). The zero value is ready.
type perContainer[T any] struct {
	mu   sync.Mutex
	byID map[string]T
}

func (c *perContainer[T]) get(id string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byID[id]
	return v, ok
}

func (c *perContainer[T]) put(id string, v T) {
	c.swap(id, v)
}

// swap records v for id and returns the value it replaces.
func (c *perContainer[T]) swap(id string, v T) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]T{}
	}
	prev, ok := c.byID[id]
	c.byID[id] = v
	return prev, ok
}

func (c *perContainer[T]) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}
