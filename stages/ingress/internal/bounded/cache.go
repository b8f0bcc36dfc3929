// Package bounded holds what ingress and its children keep in bounds because publishers drive
// it: a cache of at most N entries (subjects, topics, batched-ack streams) and a log limiter (one
// line of a kind per interval, the rest counted).
package bounded

import (
	"sync"
	"sync/atomic"
)

// Cache is a map with at most max entries, for values that are cheap to recompute but on
// the hot path (subject -> route, topic -> queue state). Subjects are unbounded in number, so an
// unbounded map would be a memory leak driven by publishers.
//
// Eviction is two-generational, an approximation of LRU with O(1) work and no per-entry list:
// new entries go into the current generation; a hit in the previous generation moves the entry
// into the current one; when the current generation holds max/2 entries it becomes the previous
// one and whatever was left in the old previous generation is dropped (and counted). An entry used
// at least once per max/2 insertions therefore never leaves.
//
// Safe for concurrent use: one mutex, held only for map operations and the caller's make
// function (cheap and bounded: mapping a subject stops at 128 topic bytes). nats.go runs one
// callback goroutine per subscription, so there is little contention.
type Cache[K comparable, V any] struct {
	mu        sync.Mutex
	cur, prev map[K]V // guarded by mu
	half      int
	evictions atomic.Int64 // entries dropped so far
}

// NewCache makes a cache of at most size entries.
func NewCache[K comparable, V any](size int) *Cache[K, V] {
	half := max(size/2, 1)
	return &Cache[K, V]{cur: make(map[K]V, half), prev: map[K]V{}, half: half}
}

// GetOrMake returns the entry for k, making it with mk on a miss.
func (c *Cache[K, V]) GetOrMake(k K, mk func(K) V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[k]; ok {
		return v
	}
	v, ok := c.prev[k]
	if ok {
		delete(c.prev, k)
	} else {
		v = mk(k)
	}
	c.putLocked(k, v)
	return v
}

// Get returns the entry for k, if there is one, without making it or moving it.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[k]; ok {
		return v, true
	}
	v, ok := c.prev[k]
	return v, ok
}

// putLocked adds k to the current generation, turning generations first when it is full.
// mu must be held.
func (c *Cache[K, V]) putLocked(k K, v V) {
	if len(c.cur) >= c.half {
		c.evictions.Add(int64(len(c.prev)))
		c.prev = c.cur
		c.cur = make(map[K]V, c.half)
	}
	c.cur[k] = v
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}

// Evictions is the number of entries dropped so far.
func (c *Cache[K, V]) Evictions() int64 { return c.evictions.Load() }
