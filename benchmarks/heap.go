package benchmarks

import (
	"runtime/metrics"
	"sync"
	"time"
)

// heapSampleEvery is how often a target child samples its heap in use.
const heapSampleEvery = 100 * time.Millisecond

// heapSampler follows the peak of this process's heap in use, sampled every heapSampleEvery
// from start until stop. Heap in use is runtime.MemStats.HeapInuse (the bytes in in-use spans:
// go_memstats_heap_inuse_bytes, which the engine's /metrics reports): the heap objects' classes
// plus the unused bytes of their spans, read through runtime/metrics, which needs no
// stop-the-world as ReadMemStats does.
//
// It also follows the peak of the process's anonymous resident memory (RssAnon: the heap, the
// stacks, the runtime's own memory), which unlike the whole resident set leaves out the store's
// mapped file pages (the kernel's page cache, which it reclaims as it needs).
type heapSampler struct {
	samples []metrics.Sample
	peak    uint64 // guarded by mu
	anon    int64  // guarded by mu
	mu      sync.Mutex
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{
		samples: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}},
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	h.sample()
	go func() {
		defer close(h.done)
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-h.quit:
				return
			case <-t.C:
				h.sample()
			}
		}
	}()
	return h
}

// sample reads the heap in use once and keeps the peak.
func (h *heapSampler) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.Read(h.samples)
	var inuse uint64
	for _, s := range h.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			inuse += s.Value.Uint64()
		}
	}
	h.peak = max(h.peak, inuse)
	if a, ok := rssAnon(); ok {
		h.anon = max(h.anon, a)
	}
}

// peakAnon is the peak anonymous resident memory seen so far (0 where it cannot be read).
func (h *heapSampler) peakAnon() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.anon
}

// stop ends the sampling, with a last sample, and returns the peak in bytes. It may be called
// again (the peak stays what the first call saw, and later).
func (h *heapSampler) stop() int64 {
	h.once.Do(func() {
		close(h.quit)
		<-h.done
	})
	h.sample()
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(h.peak)
}
