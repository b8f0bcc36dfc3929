package offsets

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// MetaFileName holds the engine's details of each offset (epoch, member, time), beside
// RocketMQ's consumerOffset.json.
const MetaFileName = "consumerOffsetMeta.json"

// Defaults of Options.
const (
	// DefaultMaxGroups bounds the consumer groups the table holds.
	DefaultMaxGroups = 100_000
	// DefaultCompactBytes is the journal size past which the table is compacted.
	DefaultCompactBytes = 8 << 20
)

// Key names a group's offsets in one topic: RocketMQ's "<topic>@<group>".
type Key struct {
	Group, Topic string
}

// Offset is a committed offset with the engine's details of it.
type Offset struct {
	// Offset is the next queue offset the group will consume.
	Offset int64
	// Epoch is the assignment epoch of the commit; 0 for a commit outside a group's
	// membership (the commit endpoint, a reset).
	Epoch int64
	// Member is the member that committed it ("" outside a membership).
	Member string
	// Time is when it was committed, in ms since the epoch.
	Time int64
}

// Commit is one offset to record.
type Commit struct {
	Group, Topic string
	QueueID      int32
	Offset       int64
	Epoch        int64
	Member       string
}

// Options configures a writable Table. Zero values are the defaults.
type Options struct {
	// Sync makes every journal write durable (fsync) before the commits it carries are
	// answered: the engine's sync flush mode. Without it a commit is in the page cache when
	// answered, as a message is in async mode.
	Sync bool
	// MaxGroups bounds the distinct group names (DefaultMaxGroups; -1: no bound).
	MaxGroups int
	// CompactBytes is the journal size past which it is folded into consumerOffset.json
	// (DefaultCompactBytes).
	CompactBytes int64
	// Now is the clock of the commits' times (time.Now).
	Now    func() time.Time
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	o.CompactBytes = cmp.Or(o.CompactBytes, DefaultCompactBytes)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Table is the offsets of every consumer group of a store. Its methods are safe for concurrent
// use. Changes (Commit, Delete) are written to the journal by group commit: whichever caller
// finds no write under way writes every change waiting, and the others wait for it.
type Table struct {
	fs    vfs.FS
	dir   string // <store>/config
	opts  Options
	log   zerolog.Logger
	write bool // false for Load's read-only table

	mu     sync.Mutex
	turn   *sync.Cond // signalled when a writer's turn ends
	state  map[Key]map[int32]Offset
	groups map[string]int // group name -> keys of it in state

	// The journal, guarded by mu except while a writer's turn does its I/O.
	journal     vfs.File
	journalSize int64
	pending     []byte // encoded records not yet written
	spare       []byte
	seq         uint64 // the last change applied
	written     uint64 // the last change written (durable in sync mode)
	failedTo    uint64 // the last change of a write that failed
	failErr     error
	writing     bool // a writer's turn is under way
	needCompact bool // the journal must be replaced before anything is appended to it
	dirty       bool // changes since the last compaction
	closed      bool
}

// Open loads the table of the store in storeDir for reading and writing: consumerOffset.json
// (or its .bak), the journal on top of it when it extends that table, then compacts what the
// journal added into a new consumerOffset.json and starts a new journal. A compaction that fails
// (a full disk) is tried again by the next change, which fails until it succeeds; the old
// journal stays in place meanwhile, so nothing committed is lost.
//
// A consumerOffset.json that is damaged, with no usable backup, and a journal whose header is
// damaged are errors (wrapping meta.ErrCorrupt) that say how to go on: a damaged table is never
// silently replaced.
func Open(fsys vfs.FS, storeDir string, opts Options) (*Table, error) {
	t, err := load(fsys, storeDir, opts.withDefaults(), true)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.writeTurnLocked(); err != nil {
		t.log.Warn().Err(err).Msg("consumer offsets: could not start a new journal; commits are refused until it can be written")
	}
	return t, nil
}

// Load loads the table of the store in storeDir read-only, as Open does, without writing
// anything: for offline reads.
func Load(fsys vfs.FS, storeDir string, log zerolog.Logger) (*Table, error) {
	return load(fsys, storeDir, Options{Logger: log}.withDefaults(), false)
}

func load(fsys vfs.FS, storeDir string, opts Options, write bool) (*Table, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	t := &Table{fs: fsys, dir: filepath.Join(storeDir, meta.ConfigDirName), opts: opts, log: opts.Logger, write: write,
		state: make(map[Key]map[int32]Offset), groups: make(map[string]int)}
	t.turn = sync.NewCond(&t.mu)
	var f meta.ConsumerOffsetFile
	if _, err := meta.Load(fsys, t.tablePath(), &f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("offsets: %w (its .bak is the previous version: copy it over %s to go back to it)", err, meta.ConsumerOffsetFileName)
	}
	for k, queues := range f.OffsetTable {
		key, ok := splitKey(k)
		if !ok {
			t.log.Warn().Str("key", k).Msgf("consumer offsets: a key of %s that is not <topic>@<group>: left out", meta.ConsumerOffsetFileName)
			continue
		}
		for q, off := range queues {
			t.setLocked(key, q, Offset{Offset: off})
		}
	}
	t.loadMeta()
	base, err := t.tableHash()
	if err != nil {
		return nil, err
	}
	b, err := fsys.ReadFile(t.journalPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("offsets: %w", err)
	default:
		applied, torn, err := replayJournal(b, base, t.applyRecord)
		switch {
		case errors.Is(err, errStaleJournal):
			t.log.Warn().Msgf("consumer offsets: %s extends another %s than the one there (rewritten since, by RocketMQ's broker?): its entries are ignored",
				JournalFileName, meta.ConsumerOffsetFileName)
			t.needCompact = true
		case err != nil:
			return nil, fmt.Errorf("offsets: %w: %w (remove %s to go back to the offsets of %s)", meta.ErrCorrupt, err,
				filepath.Join(t.dir, JournalFileName), meta.ConsumerOffsetFileName)
		default:
			if torn {
				t.log.Info().Msgf("consumer offsets: %s ends with a torn record (a crash during a commit that was not answered): left out", JournalFileName)
			}
			if applied > 0 {
				t.log.Info().Int("changes", applied).Msgf("consumer offsets: %s replayed", JournalFileName)
				t.needCompact, t.dirty = true, true
			}
		}
	}
	return t, nil
}

func (t *Table) tablePath() string   { return filepath.Join(t.dir, meta.ConsumerOffsetFileName) }
func (t *Table) metaPath() string    { return filepath.Join(t.dir, MetaFileName) }
func (t *Table) journalPath() string { return filepath.Join(t.dir, JournalFileName) }

// tableHash is the SHA-256 of consumerOffset.json's bytes (of nothing when it is missing).
func (t *Table) tableHash() ([sha256.Size]byte, error) {
	b, err := t.fs.ReadFile(t.tablePath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return [sha256.Size]byte{}, fmt.Errorf("offsets: %w", err)
	}
	return sha256.Sum256(b), nil
}

// splitKey splits RocketMQ's "<topic>@<group>" at its last '@' (a topic has none).
func splitKey(k string) (Key, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == meta.OffsetKeySeparator[0] {
			key := Key{Topic: k[:i], Group: k[i+1:]}
			return key, key.Topic != "" && ValidateGroup(key.Group) == nil
		}
	}
	return Key{}, false
}

// setLocked records off for (key, q).
func (t *Table) setLocked(key Key, q int32, off Offset) {
	queues := t.state[key]
	if queues == nil {
		queues = make(map[int32]Offset)
		t.state[key] = queues
		t.groups[key.Group]++
	}
	queues[q] = off
}

// deleteLocked forgets key; it says whether it was there.
func (t *Table) deleteLocked(key Key) bool {
	if _, ok := t.state[key]; !ok {
		return false
	}
	delete(t.state, key)
	if t.groups[key.Group]--; t.groups[key.Group] == 0 {
		delete(t.groups, key.Group)
	}
	return true
}

func (t *Table) applyRecord(r record) {
	key := Key{Group: r.group, Topic: r.topic}
	switch r.kind {
	case kindCommit:
		t.setLocked(key, r.queueID, Offset{Offset: r.offset, Epoch: r.epoch, Member: r.member, Time: r.time})
	case kindDelete:
		t.deleteLocked(key)
	}
}

// Get returns the offset group committed in (topic, queueID), and whether there is one.
func (t *Table) Get(group, topic string, queueID int32) (Offset, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off, ok := t.state[Key{group, topic}][queueID]
	return off, ok
}

// Queues returns a copy of the offsets of group in topic, by queue id (nil when none).
func (t *Table) Queues(group, topic string) map[int32]Offset {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.state[Key{group, topic}]
	if q == nil {
		return nil
	}
	out := make(map[int32]Offset, len(q))
	for id, off := range q {
		out[id] = off
	}
	return out
}

// Keys lists every (group, topic) with offsets, sorted by group, then topic.
func (t *Table) Keys() []Key {
	t.mu.Lock()
	out := make([]Key, 0, len(t.state))
	for k := range t.state {
		out = append(out, k)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Key) int { return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic)) })
	return out
}

// Groups is the number of distinct group names held.
func (t *Table) Groups() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.groups)
}

// Commit records c: the group's next offset in the queue, with the epoch and member that
// committed it. It returns once the change is in the journal (durable, with Options.Sync); a
// commit that changes nothing writes nothing. It is Apply, then Wait.
func (t *Table) Commit(c Commit) error {
	tk, err := t.Apply(c)
	if err != nil {
		return err
	}
	return t.Wait(tk)
}

// Ticket stands for a change applied to the table and not yet known to be written (Wait).
type Ticket struct{ seq uint64 }

// Apply records c in the table at once, so that readers of the table (Get) see it from now on,
// and queues it for the journal: Wait for the ticket before answering the commit. A caller that
// decides under a lock of its own whether a commit may be made (the groups' fencing) applies it
// under that lock, so the table's order is the order of its decisions, and waits outside it.
// A new group past MaxGroups is ErrTooManyGroups, and nothing changes.
func (t *Table) Apply(c Commit) (Ticket, error) {
	if err := validateCommit(c); err != nil {
		return Ticket{}, err
	}
	key := Key{c.Group, c.Topic}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.writableLocked(); err != nil {
		return Ticket{}, err
	}
	cur, ok := t.state[key][c.QueueID]
	if ok && cur.Offset == c.Offset && cur.Epoch == c.Epoch && cur.Member == c.Member {
		return Ticket{t.seq}, nil // nothing to write; settled once what came before is
	}
	if t.groups[c.Group] == 0 && t.opts.MaxGroups >= 0 && len(t.groups) >= t.opts.MaxGroups {
		return Ticket{}, fmt.Errorf("%w: the store holds the offsets of %d groups, its bound (max_groups): delete a group (engine groups delete) or raise the bound; group %q was not added",
			ErrTooManyGroups, len(t.groups), c.Group)
	}
	r := record{kind: kindCommit, time: t.opts.Now().UnixMilli(), queueID: c.QueueID, offset: c.Offset, epoch: c.Epoch,
		group: c.Group, topic: c.Topic, member: c.Member}
	t.applyRecord(r)
	return Ticket{t.queueLocked(r)}, nil
}

// Wait returns once the change of tk is written (durable, with Options.Sync), or with the error
// of the write that carried it. On an error (a full disk) the change stands in memory but was not
// made durable: the caller answers the commit as failed.
func (t *Table) Wait(tk Ticket) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waitLocked(tk.seq)
}

// Delete forgets every offset of group in topic; it says whether there were any.
func (t *Table) Delete(group, topic string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.writableLocked(); err != nil {
		return false, err
	}
	key := Key{group, topic}
	if _, ok := t.state[key]; !ok {
		return false, nil
	}
	r := record{kind: kindDelete, time: t.opts.Now().UnixMilli(), group: group, topic: topic}
	t.applyRecord(r)
	return true, t.waitLocked(t.queueLocked(r))
}

func validateCommit(c Commit) error {
	if err := ValidateGroup(c.Group); err != nil {
		return err
	}
	if err := commitlog.ValidateTopic(c.Topic); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidCommit, err)
	}
	switch {
	case c.QueueID < 0 || c.Offset < 0 || c.Epoch < 0:
		return fmt.Errorf("%w: queue %d, offset %d, epoch %d: none may be negative", ErrInvalidCommit, c.QueueID, c.Offset, c.Epoch)
	case len(c.Member) > MaxMemberLen:
		return fmt.Errorf("%w: member id of %d bytes, more than %d", ErrInvalidCommit, len(c.Member), MaxMemberLen)
	}
	return nil
}

func (t *Table) writableLocked() error {
	switch {
	case !t.write:
		return ErrReadOnly
	case t.closed:
		return ErrClosed
	}
	return nil
}

// queueLocked queues r's bytes for the journal and returns its sequence number.
func (t *Table) queueLocked(r record) uint64 {
	t.pending = appendRecord(t.pending, r)
	t.seq++
	t.dirty = true
	return t.seq
}

// waitLocked waits, as group commit does, until the change seq is written or its write failed;
// a caller that finds no write under way writes for everyone waiting.
func (t *Table) waitLocked(seq uint64) error {
	for t.written < seq {
		if t.failedTo >= seq {
			return t.failErr
		}
		if t.writing {
			t.turn.Wait()
			continue
		}
		// This caller writes for everyone waiting.
		if err := t.writeTurnLocked(); err != nil && t.failedTo < seq {
			return err
		}
	}
	return nil
}

// writeTurnLocked writes what is pending: appended to the journal, or, when the journal must
// be replaced (a failed write, its size, a start that replayed one), a compaction that writes
// the whole table and starts a new journal. It holds the writer's turn, not mu, during the I/O.
func (t *Table) writeTurnLocked() error {
	for t.writing {
		t.turn.Wait()
	}
	t.writing = true
	upTo, buf := t.seq, t.pending
	t.pending = t.spare[:0]
	compact := t.needCompact || t.journal == nil || t.journalSize+int64(len(buf)) > t.opts.CompactBytes
	var snap snapshot
	if compact {
		snap = t.snapshotLocked()
	}
	journal := t.journal
	t.mu.Unlock()
	var err error
	var size int64
	if compact {
		journal, size, err = t.compact(journal, snap)
	} else {
		size, err = t.appendJournal(journal, buf)
	}
	t.mu.Lock()
	t.spare = buf[:0]
	t.writing = false
	t.turn.Broadcast()
	if err != nil {
		t.failedTo, t.failErr = upTo, fmt.Errorf("offsets: %w", err)
		t.needCompact = true
		return t.failErr
	}
	if compact {
		t.journal, t.journalSize, t.needCompact = journal, size, false
		t.dirty = t.seq != upTo
	} else {
		t.journalSize += size
	}
	t.written = upTo
	return nil
}

func (t *Table) appendJournal(f vfs.File, buf []byte) (int64, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	if _, err := f.Write(buf); err != nil {
		return 0, err
	}
	if t.opts.Sync {
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return int64(len(buf)), nil
}

// Sync makes what was written to the journal durable (fsync): the engine's async flush mode
// calls it on an interval (Options.Sync does it before every answer instead).
func (t *Table) Sync() error {
	t.mu.Lock()
	for t.writing {
		t.turn.Wait()
	}
	t.writing = true // a turn of its own: no append while it syncs
	f := t.journal
	t.mu.Unlock()
	var err error
	if f != nil {
		err = f.Sync()
	}
	t.mu.Lock()
	t.writing = false
	t.turn.Broadcast()
	if err != nil {
		t.needCompact = true // the journal's state on disk is not known: replace it
	}
	t.mu.Unlock()
	return err
}

// Abandon closes the journal without compacting, as a crash would leave it; later changes fail
// with ErrClosed.
func (t *Table) Abandon() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.writing {
		t.turn.Wait()
	}
	t.closed = true
	if t.journal != nil {
		_ = t.journal.Close()
		t.journal = nil
	}
}

// Close folds the journal into consumerOffset.json when anything changed since the last
// compaction (so that RocketMQ's broker sees every group's progress after a clean stop) and
// closes the journal. Later changes fail with ErrClosed.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.write || t.closed {
		return nil
	}
	var err error
	if t.dirty || t.needCompact {
		t.needCompact = true
		err = t.writeTurnLocked()
	}
	for t.writing {
		t.turn.Wait()
	}
	t.closed = true
	if t.journal != nil {
		err = errors.Join(err, t.journal.Close())
		t.journal = nil
	}
	return err
}

// queueKey is a queue id as consumerOffset.json's keys have it.
func queueKey(q int32) string { return strconv.FormatInt(int64(q), 10) }
