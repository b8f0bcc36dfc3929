package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"sync"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// QueueStarts are the queues that start above offset 0 here: the partitions taken over from
// another engine, whose next offsets continue the previous owner's. The appender asks for a
// queue's start (Start) when it first appends to a queue the ConsumeQueues do not have; the
// ConsumeQueue then starts at that offset (its first file filled with blank units before it, as
// RocketMQ does). Persisted (config/queueStarts.json) before it is used (Set), so that a restart
// before the queue's first message keeps it.
type QueueStarts struct {
	fsys   vfs.FS
	path   string
	mu     sync.Mutex
	starts map[appender.QueueKey]int64 // guarded by mu
}

// LoadQueueStarts reads config/queueStarts.json of the store in dir (none: no start).
func LoadQueueStarts(fsys vfs.FS, dir string) (*QueueStarts, error) {
	s := &QueueStarts{fsys: fsys, path: filepath.Join(dir, meta.ConfigDirName, meta.QueueStartsFileName),
		starts: map[appender.QueueKey]int64{}}
	var f meta.QueueStartsFile
	if _, err := meta.Load(fsys, s.path, &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, nil
		}
		return nil, err
	}
	for topic, qs := range f.Starts {
		for q, off := range qs {
			s.starts[appender.QueueKey{Topic: topic, QueueID: q}] = off
		}
	}
	return s, nil
}

// Apply raises the recovered next offsets of next to the queues' starts: a queue recovered
// below its start holds only the blank units before it (a crash before its first unit), and
// continues at the start.
func (s *QueueStarts) Apply(next map[appender.QueueKey]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, start := range s.starts {
		if off, ok := next[k]; ok && off < start {
			next[k] = start
		}
	}
}

// Start is the first offset of queue k here, if it starts above 0 (the appender's StartOffset).
func (s *QueueStarts) Start(k appender.QueueKey) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.starts[k]
	return off, ok
}

// Set makes next the start of queue k, persisted before it returns.
func (s *QueueStarts) Set(k appender.QueueKey, next int64) error {
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
	if err := s.fsys.MkdirAll(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("engine: queue starts: %w", err)
	}
	if err := meta.Save(s.fsys, s.path, f); err != nil {
		return fmt.Errorf("engine: queue starts: %w", err)
	}
	s.starts = all
	return nil
}
