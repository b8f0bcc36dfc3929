package consumequeue

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// Store owns every ConsumeQueue under <root>/consumequeue: it finds them on disk (Load),
// creates them for the dispatcher (FindOrCreate), runs the recovery, retention and flush steps
// over all of them, and bounds how many are mapped at once.
//
// A queue costs a few words and its segment.Queue while mapped; nothing per queue runs in the
// background. Queues are mapped on first use, so Load itself maps nothing; RecoverAll maps each
// queue in turn and the bound unmaps them again as it goes.
type Store struct {
	cfg *config

	mu     sync.RWMutex
	queues map[queueKey]*ConsumeQueue
	closed bool

	mapped mappedSet
}

type queueKey struct {
	topic string
	id    int32
}

// Open makes a Store over opts.Root, creating <root>/consumequeue if needed (unless read-only).
// It reads nothing: call Load to find the queues already on disk.
func Open(opts Options) (*Store, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	if !cfg.readOnly {
		if err := cfg.fs.MkdirAll(cfg.dir); err != nil {
			return nil, fmt.Errorf("consumequeue: %w", err)
		}
		cfg.dirSyncs = segment.NewDirSyncs(cfg.fs, cfg.dir, cfg.syncFSAbove)
	}
	return &Store{cfg: cfg, queues: make(map[queueKey]*ConsumeQueue)}, nil
}

// Dir is <root>/consumequeue.
func (s *Store) Dir() string { return s.cfg.dir }

// Load finds the queues on disk, <topic>/<queueId> directories, without mapping any file.
// As RocketMQ, a queue id must be a non-negative int; unlike RocketMQ, it must also be written
// the canonical way ("7", not "007", which RocketMQ would read as queue 7 and then look for in
// directory "7"). Entries that are not such directories, and topic directories whose name could
// not be a topic, are skipped and returned, for the caller to report.
func (s *Store) Load() (skipped []string, err error) {
	topics, err := s.cfg.fs.ReadDir(s.cfg.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("consumequeue: %w", err)
	}
	for _, t := range topics {
		tdir := filepath.Join(s.cfg.dir, t.Name)
		if !t.IsDir || checkTopic(t.Name) != nil {
			skipped = append(skipped, tdir)
			continue
		}
		ids, err := s.cfg.fs.ReadDir(tdir)
		if err != nil {
			return skipped, fmt.Errorf("consumequeue: %w", err)
		}
		for _, e := range ids {
			id, ok := parseQueueID(e.Name)
			if !e.IsDir || !ok {
				skipped = append(skipped, filepath.Join(tdir, e.Name))
				continue
			}
			if _, err := s.FindOrCreate(t.Name, id); err != nil {
				return skipped, err
			}
		}
	}
	return skipped, nil
}

// parseQueueID reads a queue directory name: a non-negative int32 in canonical decimal.
func parseQueueID(name string) (int32, bool) {
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name {
		return 0, false
	}
	return int32(n), true
}

// checkTopic refuses names that are not a single directory name. Topics are validated when
// they enter the engine; this is the second line of defence against a path escaping the store.
func checkTopic(topic string) error {
	if topic == "" || topic == "." || topic == ".." || strings.ContainsAny(topic, "/\x00") {
		return fmt.Errorf("%w: topic %q", ErrBadName, topic)
	}
	return nil
}

// Find returns the queue (topic, queueID), or nil if the Store has none.
func (s *Store) Find(topic string, queueID int32) *ConsumeQueue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.queues[queueKey{topic, queueID}]
}

// FindOrCreate returns the queue (topic, queueID), creating it if the Store has none; the
// dispatcher calls it for every message. A new queue exists only in memory until its first
// Put creates its directory and first file. Safe for concurrent use.
func (s *Store) FindOrCreate(topic string, queueID int32) (*ConsumeQueue, error) {
	k := queueKey{topic, queueID}
	s.mu.RLock()
	cq, closed := s.queues[k], s.closed
	s.mu.RUnlock()
	if cq != nil {
		return cq, nil
	}
	if closed {
		return nil, ErrClosed
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if queueID < 0 {
		return nil, fmt.Errorf("%w: queue id %d", ErrBadName, queueID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if cq := s.queues[k]; cq != nil {
		return cq, nil
	}
	cq = newQueue(s, topic, queueID, filepath.Join(s.cfg.dir, topic, strconv.Itoa(int(queueID))))
	s.queues[k] = cq
	return cq, nil
}

// MaxMapped is the bound on mapped queues in force (negative: none); see Options.MaxMapped.
func (s *Store) MaxMapped() int { return s.cfg.maxMapped }

// Queues returns every queue, sorted by topic and queue id.
func (s *Store) Queues() []*ConsumeQueue {
	s.mu.RLock()
	qs := make([]*ConsumeQueue, 0, len(s.queues))
	for _, cq := range s.queues {
		qs = append(qs, cq)
	}
	s.mu.RUnlock()
	slices.SortFunc(qs, func(a, b *ConsumeQueue) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.queueID, b.queueID))
	})
	return qs
}

// Topics returns the topics that have at least one queue, sorted.
func (s *Store) Topics() []string {
	s.mu.RLock()
	var ts []string
	for k := range s.queues {
		ts = append(ts, k.topic)
	}
	s.mu.RUnlock()
	slices.Sort(ts)
	return slices.Compact(ts)
}

// QueueIDs returns the queue ids of topic, sorted.
func (s *Store) QueueIDs(topic string) []int32 {
	s.mu.RLock()
	var ids []int32
	for k := range s.queues {
		if k.topic == topic {
			ids = append(ids, k.id)
		}
	}
	s.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

// MaxOffsets returns every queue's MaxOffset by topic and queue id: the next queue offset the
// appender gives each queue after recovery (RocketMQ's recoverTopicQueueTable).
func (s *Store) MaxOffsets() map[string]map[int32]int64 {
	out := make(map[string]map[int32]int64)
	for _, cq := range s.Queues() {
		m := out[cq.topic]
		if m == nil {
			m = make(map[int32]int64)
			out[cq.topic] = m
		}
		m[cq.queueID] = cq.MaxOffset()
	}
	return out
}

// MaxPhysicalOffset is the largest MaxPhysicalOffset of all queues, or -1: after RecoverAll,
// where the CommitLog's recovery starts re-dispatching (RocketMQ's dispatchFromPhyOffset).
func (s *Store) MaxPhysicalOffset() int64 {
	m := int64(-1)
	for _, cq := range s.Queues() {
		m = max(m, cq.MaxPhysicalOffset())
	}
	return m
}

// each runs fn on every queue in order and stops at the first error.
func (s *Store) each(fn func(*ConsumeQueue) error) error {
	for _, cq := range s.Queues() {
		if err := fn(cq); err != nil {
			return err
		}
	}
	return nil
}

// RecoverAll runs Recover on every queue (recovery step 1) and returns MaxPhysicalOffset.
func (s *Store) RecoverAll() (int64, error) {
	err := s.each(func(cq *ConsumeQueue) error {
		_, err := cq.Recover()
		return err
	})
	if err != nil {
		return -1, err
	}
	return s.MaxPhysicalOffset(), nil
}

// TruncateDirtyAll runs TruncateDirty(phyOffset) on every queue (recovery step 4).
func (s *Store) TruncateDirtyAll(phyOffset int64) error {
	return s.each(func(cq *ConsumeQueue) error { return cq.TruncateDirty(phyOffset) })
}

// TruncateUnverifiedAll runs TruncateUnverified on every queue.
func (s *Store) TruncateUnverifiedAll(from int64, verify func(cq *ConsumeQueue, n int64, u Unit) bool) error {
	return s.each(func(cq *ConsumeQueue) error {
		return cq.TruncateUnverified(from, func(n int64, u Unit) bool { return verify(cq, n, u) })
	})
}

// ZeroPastEndAll runs ZeroPastEnd on every queue (recovery after an unclean exit).
func (s *Store) ZeroPastEndAll() error {
	return s.each(func(cq *ConsumeQueue) error { return cq.ZeroPastEnd() })
}

// CorrectMinOffsetAll runs CorrectMinOffset on every queue (recovery step 5).
func (s *Store) CorrectMinOffsetAll(minCommitLogOffset int64) error {
	return s.each(func(cq *ConsumeQueue) error { return cq.CorrectMinOffset(minCommitLogOffset) })
}

// DeleteExpiredAll runs DeleteExpired on every queue (retention, after the CommitLog's min
// offset went up) and returns how many files it deleted. It goes on past a queue that fails and
// returns every error.
func (s *Store) DeleteExpiredAll(minCommitLogOffset int64) (int, error) {
	total := 0
	var errs []error
	for _, cq := range s.Queues() {
		n, err := cq.DeleteExpired(minCommitLogOffset)
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// FlushAll makes the directories and files of the queues created since the last call durable,
// runs Flush(leastPages) on every mapped queue (unmapped ones hold nothing unflushed), then
// unmaps idle queues if more than the bound are mapped. It goes on past a queue that fails and
// returns every error.
func (s *Store) FlushAll(leastPages int) error {
	queues := s.mappedQueues()
	if s.atOnce(queues, leastPages) {
		err := s.flushAtOnce(queues)
		s.sweep()
		return err
	}
	var errs []error
	if s.cfg.dirSyncs != nil {
		errs = append(errs, s.cfg.dirSyncs.Sync())
	}
	for _, cq := range queues {
		errs = append(errs, cq.Flush(leastPages))
	}
	s.sweep()
	return errors.Join(errs...)
}

// atOnce says whether FlushAll(leastPages) would sync more files and directories than
// SyncFSAbove, one by one.
func (s *Store) atOnce(queues []*ConsumeQueue, leastPages int) bool {
	above := s.cfg.syncFSAbove
	if s.cfg.dirSyncs == nil || above < 0 {
		return false
	}
	n := s.cfg.dirSyncs.Len()
	for _, cq := range queues {
		if n > above {
			break
		}
		if cq.due(leastPages) {
			n++
		}
	}
	return n > above
}

// flushAtOnce flushes every written byte of queues and makes every new directory entry durable
// with one sync of the file system (segment.DirSyncs.SyncAll): what FlushAll(0) does, in one
// call instead of one per file and directory.
func (s *Store) flushAtOnce(queues []*ConsumeQueue) error {
	type held struct {
		u    segment.Unflushed
		done func()
	}
	var hs []held
	var ranges []vfs.SegmentRange
	for _, cq := range queues {
		if u, done, ok := cq.unflushed(); ok {
			hs = append(hs, held{u, done})
			ranges = u.Ranges(ranges)
		}
	}
	err := s.cfg.dirSyncs.SyncAll(ranges)
	for _, h := range hs {
		h.u.Done(err == nil)
		h.done()
	}
	if err != nil {
		return fmt.Errorf("consumequeue: sync of %d files and the new directories at once: %w", len(ranges), err)
	}
	return nil
}

// Close closes every queue. It does not flush: call FlushAll(0) first.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, cq := range s.Queues() {
		errs = append(errs, cq.Close())
	}
	s.mapped.mu.Lock()
	for _, cq := range s.mapped.queues {
		cq.ringed = false
	}
	s.mapped.queues = nil
	s.mapped.mu.Unlock()
	errs = append(errs, s.takeErrs())
	if s.cfg.dirSyncs != nil {
		errs = append(errs, s.cfg.dirSyncs.Close())
	}
	return errors.Join(errs...)
}
