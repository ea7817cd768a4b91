package uids

// SetCacheMax lowers how many chats' uids a stays holding in memory.
func (a *Allocator) SetCacheMax(n int) { a.cacheMax = n }

// Cached is how many chats' uids a holds in memory.
func (a *Allocator) Cached() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
