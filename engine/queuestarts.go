package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"sync"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/store/meta"
)

// queueStarts are the queues that start above offset 0 here: the partitions taken over from
// another engine (Server.AcquirePartition), whose next offsets continue the previous owner's. The
// appender asks for a queue's start when it first appends to a queue the ConsumeQueues do not
// have; the ConsumeQueue then starts at that offset (its first file filled with blank units
// before it, as RocketMQ does). Persisted (config/queueStarts.json) before it is used, so that a
// restart before the queue's first message keeps it.
type queueStarts struct {
	mu     sync.Mutex
	path   string
	starts map[appender.QueueKey]int64 // guarded by mu
}

// loadQueueStarts reads config/queueStarts.json (none: no start).
func (e *Engine) loadQueueStarts() error {
	e.starts = &queueStarts{path: filepath.Join(e.opts.Dir, meta.ConfigDirName, meta.QueueStartsFileName),
		starts: map[appender.QueueKey]int64{}}
	var f meta.QueueStartsFile
	if _, err := meta.Load(e.opts.FS, e.starts.path, &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for topic, qs := range f.Starts {
		for q, off := range qs {
			e.starts.starts[appender.QueueKey{Topic: topic, QueueID: q}] = off
		}
	}
	return nil
}

// start is the first offset of queue k here, if it starts above 0.
func (s *queueStarts) start(k appender.QueueKey) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.starts[k]
	return off, ok
}

// StartQueue makes queue (topic, queueID) take offset next as its next one: a partition taken
// over from another engine continues that engine's offsets. A queue this engine already has must
// end exactly there (taking back a partition nothing was written to since); otherwise its offsets
// would have a hole or overlap, and StartQueue refuses. The start is persisted before it returns.
// It first waits until everything written is dispatched, so that the queue's end is known.
func (e *Engine) StartQueue(ctx context.Context, topic string, queueID int32, next int64) error {
	if next < 0 || next > e.cq.MaxQueueOffset()+1 {
		return fmt.Errorf("engine: queue %s/%d: start offset %d: want 0 to %d, the end of a full queue", topic, queueID, next,
			e.cq.MaxQueueOffset()+1)
	}
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		return err
	}
	if cq := e.cq.Find(topic, queueID); cq != nil {
		if max := cq.MaxOffset(); max != next && (max > 0 || cq.MinOffset() > 0) {
			return fmt.Errorf("engine: queue %s/%d ends at %d here, not at %d: a partition can only "+
				"move back to an engine that holds nothing past its last offset there, and nothing before it", topic, queueID, max, next)
		} else if max == next {
			return nil
		}
	}
	k := appender.QueueKey{Topic: topic, QueueID: queueID}
	s := e.starts
	s.mu.Lock()
	defer s.mu.Unlock()
	if off, ok := s.starts[k]; ok && off == next {
		return nil
	}
	all := maps.Clone(s.starts)
	all[k] = next
	f := meta.QueueStartsFile{Starts: map[string]map[int32]int64{}}
	for k, off := range all {
		if f.Starts[k.Topic] == nil {
			f.Starts[k.Topic] = map[int32]int64{}
		}
		f.Starts[k.Topic][k.QueueID] = off
	}
	if err := e.opts.FS.MkdirAll(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("engine: queue starts: %w", err)
	}
	if err := meta.Save(e.opts.FS, s.path, f); err != nil {
		return fmt.Errorf("engine: queue starts: %w", err)
	}
	s.starts = all
	return nil
}
