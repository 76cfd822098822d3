package objectwal

import (
	"container/list"
	"sync"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// runCache is a byte-bounded LRU of decoded runs keyed by target. Runs are
// immutable once written, so a cached run never goes stale; it is dropped
// early only when the core declares it garbage.
type runCache struct {
	mu     sync.Mutex
	budget int64
	size   int64
	ll     *list.List
	items  map[string]*list.Element
}

type cacheItem struct {
	key     string
	entries []provider.ReadEntry
	size    int64
}

func newRunCache(budget int64) *runCache {
	return &runCache{budget: budget, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *runCache) get(key string) ([]provider.ReadEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheItem).entries, true
}

func (c *runCache) put(key string, entries []provider.ReadEntry) {
	var size int64 = 64
	for _, e := range entries {
		size += int64(len(e.Payload)) + 48
	}
	if size > c.budget/4 {
		return // one huge run must not flush the whole cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&cacheItem{key: key, entries: entries, size: size})
	c.size += size
	for c.size > c.budget {
		el := c.ll.Back()
		it := el.Value.(*cacheItem)
		c.ll.Remove(el)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

func (c *runCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		it := el.Value.(*cacheItem)
		c.ll.Remove(el)
		delete(c.items, key)
		c.size -= it.size
	}
}
