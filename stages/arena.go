package stages

import (
	"sync"
	"sync/atomic"
)

// ArenaSize is the size of an Arena's buffer.
const ArenaSize = 64 << 10

// Arena is a buffer that ingress encodes records into, many records to a buffer, so that a
// batch costs one buffer per 64 KiB and not an allocation per message. It is recycled, not
// left to the collector: at 128-byte bodies the records are the largest share of what the
// engine allocates, and the collector's work grows with every byte allocated. The encoder
// holds one reference while it fills the buffer, and each batch with records in it one more
// (Batch.Arenas); the appender releases the batch's once it has copied its records out
// (Batch.ReleaseBytes). The last release returns the buffer to the pool.
type Arena struct {
	Buf  []byte
	refs atomic.Int32
}

var arenaPool = sync.Pool{New: func() any { return &Arena{Buf: make([]byte, 0, ArenaSize)} }}

// NewArena returns an empty arena with one reference, the caller's.
func NewArena() *Arena {
	a := arenaPool.Get().(*Arena)
	a.Buf = a.Buf[:0]
	a.refs.Store(1)
	return a
}

// Hold takes one more reference.
func (a *Arena) Hold() { a.refs.Add(1) }

// Release drops one reference; the last returns the buffer to the pool, and nothing may read
// or write it after.
func (a *Arena) Release() {
	switch n := a.refs.Add(-1); {
	case n == 0:
		arenaPool.Put(a)
	case n < 0:
		panic("stages: arena released more often than held")
	}
}
