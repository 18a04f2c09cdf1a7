package fastgpt

// OpenRelays is the number of WebSocket relays in progress.
func (p *Proxy) OpenRelays() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.relays)
}
