// Package recovery brings a store's derived files in line with its CommitLog, the only truth,
// before the engine takes traffic: where the log's valid data ends (from the checkpoint, so the
// work is bounded by it), what the ConsumeQueues and IndexFiles lack (re-dispatched through the
// Builder live dispatch uses) and what they hold past the end (dropped), and where each queue
// continues: the next offsets for the writer, raised to the starts of the queues that continue
// another engine's offsets (QueueStarts, persisted in config/queueStarts.json). It owns the
// rules of RocketMQ's normal and abnormal recovery that apply, and reports what it did (Report).
package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// Report is what recovery found and did before taking traffic.
type Report struct {
	// CleanExit says the last run stopped cleanly (no abort file).
	CleanExit bool
	// FromCheckpoint says the checkpoint carried our offsets; otherwise the start was derived
	// from the ConsumeQueues (a store RocketMQ wrote, or a fresh one).
	FromCheckpoint bool
	// Start and End are the CommitLog range scanned and re-dispatched; End is the log's end.
	Start, End int64
	// Records and Bytes were scanned (and re-dispatched) in [Start, End).
	Records, Bytes int64
	// Tail is how the valid data ended; Corrupt says why when it ended on a bad record, and Cut
	// bounds the bytes dropped after the end.
	Tail    string
	Corrupt string
	Cut     int64
	// NoPropCRCEnd is the end of the last record scanned without the __CRC32# property (0:
	// none): what another writer appended, so the property is claimed only from there on.
	NoPropCRCEnd int64
	// IndexDropped lists IndexFiles dropped because they held entries past the end;
	// IndexEntriesDropped counts entries of the newest file dropped as unsound after a crash.
	IndexDropped        []string
	IndexEntriesDropped int64
	// Dispatched is where live dispatch starts: End, or the first record recovery could not
	// re-dispatch for want of disk space (NoSpace says why; see stallBuilder).
	Dispatched int64
	NoSpace    string
	Took       time.Duration
}

// Builder re-dispatches records into the ConsumeQueues and the IndexFile (dispatch.Builder
// implements it).
type Builder interface {
	// Apply builds the unit and index entries of the record at phys.
	Apply(phys int64, v commitlog.View) error
	// Forget drops what Apply keeps between records (the end of recovery).
	Forget()
}

// Stores are the open stores of the store directory. Index is nil without an IndexFile.
type Stores struct {
	Log           *commitlog.Log
	ConsumeQueues *consumequeue.Store
	Index         *indexfile.Service
	Builder       Builder
	Logger        zerolog.Logger
}

// recoverer is one run of Run.
type recoverer struct {
	Stores
	rep *Report
}

// Run brings the derived files in line with the CommitLog: it finds where the log's valid data
// ends (scanning from the checkpoint cp, so the work is bounded by the checkpoint, not the
// store's size), re-dispatches what the ConsumeQueues and IndexFiles may lack through the same
// Builder live dispatch uses, and drops units and entries that point past the end; clean says
// the last run stopped cleanly. It returns what it did and the next queue offsets for the
// writer. A full disk does not fail it: what cannot be re-dispatched for want of space is left
// to live dispatch (Report.Dispatched).
func Run(st Stores, cp checkpoint.Checkpoint, clean bool) (Report, map[appender.QueueKey]int64, error) {
	var rep Report
	stall := newStallBuilder(st.Builder)
	st.Builder = stall
	next, err := (&recoverer{Stores: st, rep: &rep}).run(cp, clean)
	if err == nil {
		stall.finish(&rep, next)
	}
	return rep, next, err
}

func (e *recoverer) run(cp checkpoint.Checkpoint, clean bool) (map[appender.QueueKey]int64, error) {
	start := time.Now()
	rep := e.rep
	rep.CleanExit = clean

	cqEnd, err := e.ConsumeQueues.RecoverAll()
	if err != nil {
		return nil, fmt.Errorf("recover consumequeues: %w", err)
	}
	ext := e.extension(cp, cqEnd)
	var from, sealed int64
	switch {
	case ext.Valid:
		from, sealed = ext.DispatchedOffset, ext.DurableOffset
		rep.FromCheckpoint = true
	case clean:
		from = cqEnd // RocketMQ's normal recovery: dispatch from the ConsumeQueues' end
	default:
		from = e.Log.MinOffset() // no offsets to trust: scan the whole log
	}
	from = max(from, 0)
	if !clean {
		// Units written after the last flush may be torn into something that looks valid:
		// keep each queue only up to its last unit below from that matches its record.
		// Units of records retention deleted cannot be checked against them (retention.go).
		if err := e.ConsumeQueues.TruncateUnverifiedAll(max(from, e.Log.MinOffset()), e.unitVerifier(from)); err != nil {
			return nil, fmt.Errorf("check consumequeues: %w", err)
		}
	}
	if e.Index != nil && !clean {
		if !ext.Valid {
			// RocketMQ's rule after an abnormal exit: index files newer than the checkpoint may
			// lack entries that never reached the disk.
			dropped, err := e.Index.DropNewerThan(cp.IndexMsgTimestamp)
			if err != nil {
				return nil, err
			}
			rep.IndexDropped = append(rep.IndexDropped, dropped...)
		}
		// The newest IndexFile's unflushed part may be torn, its slot page may have reached the
		// disk without its header (slots naming entries past the count, which the writer would
		// fill again), and a slot pointing at a lost entry hides every older entry of its
		// chain: keep the sound entries below from (all the sound ones without our offsets),
		// rebuild the slots and chains from them, and re-index what was dropped below from
		// (re-dispatch does the rest).
		before := int64(math.MaxInt64)
		if ext.Valid {
			before = from
		}
		rebuildFrom, dropped, err := e.Index.RelinkLast(before, e.storeTime)
		if err != nil {
			return nil, fmt.Errorf("relink index: %w", err)
		}
		rep.IndexEntriesDropped = int64(dropped)
		if rebuildFrom >= 0 && rebuildFrom < from {
			if _, err := e.Log.Each(max(rebuildFrom, e.Log.MinOffset()), from, commitlog.Check{}, e.Builder.Apply); err != nil {
				return nil, fmt.Errorf("re-index from %d: %w", rebuildFrom, err)
			}
		}
	}

	builder := e.Builder
	log := e.Logger
	res, err := e.Log.Recover(commitlog.RecoverOptions{
		From:    from,
		PropCRC: cp.PropCRCRule(),
		Sealed:  sealed,
		// A clean shutdown writes its last checkpoint with everything synced and dispatched;
		// RocketMQ may have appended since it was written.
		CleanEnd: clean && ext.Valid && !ext.Rewritten && ext.DispatchedOffset == ext.DurableOffset,
		Check:    commitlog.Check{},
		OnRecord: builder.Apply,
		OnSegment: func(name string, off int64) {
			log.Info().Str("segment", filepath.Base(name)).Int64("offset", off).Msg("recovering commitlog")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("recover commitlog: %w", err)
	}
	rep.Start, rep.End, rep.Records, rep.Bytes = res.Start, res.End, res.Records, res.Bytes
	rep.Tail, rep.Cut, rep.NoPropCRCEnd = res.Tail.String(), res.Cut, res.NoPropCRCEnd
	if res.Corrupt != nil {
		rep.Corrupt = res.Corrupt.Error()
	}

	if err := e.ConsumeQueues.TruncateDirtyAll(res.End); err != nil {
		return nil, fmt.Errorf("truncate consumequeues: %w", err)
	}
	if !clean {
		// Units written after a queue's last flush can reach the disk past a lost page (the
		// kernel writes mapped pages back in no order): stranded past the queue's end, they
		// would join it once it is written up to them.
		if err := e.ConsumeQueues.ZeroPastEndAll(); err != nil {
			return nil, fmt.Errorf("clear consumequeues past their ends: %w", err)
		}
	}
	if e.Index != nil {
		dropped, rebuildFrom, err := e.Index.DropPast(res.End)
		if err != nil {
			return nil, err
		}
		rep.IndexDropped = append(rep.IndexDropped, dropped...)
		if rebuildFrom >= 0 && rebuildFrom < res.End {
			// Rebuild the dropped files' entries below the new end, the scanned range included:
			// the scan indexed nothing below the end of the files it found (the index writer
			// skips what it takes for indexed), and those were dropped. The ConsumeQueues skip
			// what they already hold.
			if _, err := e.Log.Each(max(rebuildFrom, e.Log.MinOffset()), res.End, commitlog.Check{}, builder.Apply); err != nil {
				return nil, fmt.Errorf("rebuild index: %w", err)
			}
		}
	}
	builder.Forget()
	if err := e.ConsumeQueues.CorrectMinOffsetAll(e.Log.MinOffset()); err != nil {
		return nil, err
	}

	// Make the recovered state durable before taking traffic, so that a crash right after
	// start does not redo the work.
	if err := e.Log.Flush(res.End); err != nil {
		return nil, err
	}
	next := make(map[appender.QueueKey]int64)
	for topic, queues := range e.ConsumeQueues.MaxOffsets() {
		for id, max := range queues {
			next[appender.QueueKey{Topic: topic, QueueID: id}] = max
		}
	}
	rep.Took = time.Since(start)
	return next, nil
}

// PropCRCFrom is where the last run's records all carry the whole-record CRC, from the
// checkpoint (-1 when it does not say, or when RocketMQ, which writes no such property, has run
// on the store since).
func PropCRCFrom(cp checkpoint.Checkpoint) int64 {
	if !cp.Ext.Valid || cp.Ext.Rewritten {
		return -1
	}
	return cp.Ext.PropCRCFrom
}

// extension is what recovery takes from the checkpoint's extension: its dispatched offset, never
// past its durable one (what the scan may start from). After RocketMQ ran on the
// store (Rewritten) the offsets are a lower bound: RocketMQ may have appended records after them,
// which the scan from there finds and re-dispatches, so they are never a reason to drop
// anything. The scan then starts no later than the ConsumeQueues' end (RocketMQ's own view of
// what it dispatched) and only where a record starts: RocketMQ may, in principle, have cut and
// rewritten the log below them, and a scan from inside a record would take the rest of the log
// for a torn tail. Where neither holds, recovery goes by RocketMQ's fields alone.
func (e *recoverer) extension(cp checkpoint.Checkpoint, cqEnd int64) checkpoint.Ext {
	ext := cp.Ext
	if !ext.Valid {
		return ext
	}
	// Only what was durable is certain to be there: a scan from a dispatched offset past the
	// durable one (an async engine's checkpoint before this rule) would start past records a
	// power cut lost and take their absence for a clean end.
	ext.DispatchedOffset = min(ext.DispatchedOffset, ext.DurableOffset)
	if !ext.Rewritten {
		return ext
	}
	ext.DispatchedOffset = min(ext.DispatchedOffset, cqEnd)
	if !e.Log.StartsAt(ext.DispatchedOffset) {
		e.Logger.Warn().Int64("dispatched", cp.Ext.DispatchedOffset).Int64("consumequeues_end", cqEnd).
			Msg("RocketMQ rewrote the checkpoint and no record starts where its offsets say: recovering by RocketMQ's fields")
		return checkpoint.Ext{}
	}
	return ext
}

// RecoveredTimestamp is the store timestamp the first checkpoint after a recovery that
// re-dispatched nothing must carry: the checkpoint's timestamps still describe the data, which
// recovery has all flushed, and a kill -9 before the next thorough flush would otherwise leave
// RocketMQ a checkpoint of zeros (it would recover from the first file and drop every index
// file). It is the earlier of the loaded checkpoint's CommitLog and ConsumeQueue timestamps,
// the point RocketMQ's abnormal recovery would start from, but never later than now (a damaged
// value would make RocketMQ skip what this run writes).
func RecoveredTimestamp(cp checkpoint.Checkpoint, now int64) int64 {
	ts := min(cp.PhysicMsgTimestamp, cp.LogicsMsgTimestamp)
	if ts < 0 || ts > now {
		return 0
	}
	return ts
}

// unitVerifier is recovery's check of a ConsumeQueue unit below from after an unclean exit
// (see consumequeue.TruncateUnverified): a unit must match the CommitLog record it names. A
// unit that names a record retention deleted (below the log's start) cannot be read back; it
// is kept as long as it is not where re-dispatch will build a unit anyway. Retention deletes
// only records whose units a checkpoint had flushed, so such units are on disk whole; only
// units written after the last checkpoint, for records at or past from, can be torn into
// garbage, and those sit at or past the first queue offset the records from from on take.
func (e *recoverer) unitVerifier(from int64) func(*consumequeue.ConsumeQueue, int64, consumequeue.Unit) bool {
	start := e.Log.MinOffset()
	var once sync.Once
	var first map[appender.QueueKey]int64 // each queue's lowest queue offset among records from from on
	return func(cq *consumequeue.ConsumeQueue, n int64, u consumequeue.Unit) bool {
		if u.Phys >= start {
			return e.unitMatchesRecord(cq, n, u)
		}
		size := e.Log.FileSize()
		if !u.Valid() || u.End() > start || u.Phys%size+int64(u.Size) > size {
			return false // no record could be there
		}
		once.Do(func() {
			first = make(map[appender.QueueKey]int64)
			// The scan ends at the first invalid record: where recovery will cut the log.
			e.Log.Each(max(from, start), e.Log.MaxOffset(), commitlog.Check{}, func(_ int64, v commitlog.View) error {
				if tx := v.TransactionType(); tx != commitlog.TxNotType && tx != commitlog.TxCommit {
					return nil // prepared and rolled back records get no unit
				}
				k := appender.QueueKey{Topic: string(v.Topic()), QueueID: v.QueueID()}
				if q, ok := first[k]; !ok || v.QueueOffset() < q {
					first[k] = v.QueueOffset()
				}
				return nil
			})
		})
		k, ok := first[appender.QueueKey{Topic: cq.Topic(), QueueID: cq.QueueID()}]
		return !ok || n < k
	}
}

// storeTime is the store timestamp of the record at phys, for the IndexFile's header.
func (e *recoverer) storeTime(phys int64) (int64, bool) {
	v, release, err := e.Log.Read(phys)
	if err != nil {
		return 0, false
	}
	defer release()
	return v.StoreTimestamp(), true
}

// unitMatchesRecord says whether unit n of cq names a record of that queue at that offset.
func (e *recoverer) unitMatchesRecord(cq *consumequeue.ConsumeQueue, n int64, u consumequeue.Unit) bool {
	v, release, err := e.Log.Read(u.Phys)
	if err != nil {
		return false
	}
	defer release()
	return v.TotalSize() == int(u.Size) && v.QueueOffset() == n && v.QueueID() == cq.QueueID() &&
		string(v.Topic()) == cq.Topic()
}

// LoadCheckpoint reads the checkpoint at path; a missing one is a fresh store. An extension that is
// damaged or of an unknown version is logged and left out: recovery then goes by RocketMQ's
// fields, which are kept, as RocketMQ keeps them (they have no check of their own), so that
// RocketMQ's rules (which index files an abnormal exit drops) apply as RocketMQ would apply them.
func LoadCheckpoint(fsys vfs.FS, path string, log zerolog.Logger) checkpoint.Checkpoint {
	cp, err := checkpoint.Load(fsys, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
	default:
		log.Warn().Err(err).Msg("checkpoint extension unreadable; recovering by RocketMQ's fields")
		cp.Ext = checkpoint.Ext{}
	}
	switch {
	case cp.Ext.Rewritten:
		log.Info().Int64("dispatched", cp.Ext.DispatchedOffset).Int64("confirm_offset", cp.ConfirmPhyOffset).
			Msg("RocketMQ rewrote the checkpoint since the engine wrote it: its offsets are taken as a lower bound")
	case cp.Ext.Stale:
		log.Info().Msg("the checkpoint's version-1 extension no longer matches RocketMQ's fields (RocketMQ ran on the store?): recovering by RocketMQ's fields")
	}
	return cp
}
