package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync/atomic"
	"time"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// verifier is one run of Verify.
type verifier struct {
	opts     Options
	ro       roFS
	rep      *Report
	problems *collector
	log      *commitlog.Log // read-only; nil when the CommitLog cannot be read
	rule     commitlog.PropCRCRule
	expired  atomic.Int64

	// What Repair needs besides the report.
	chain     *chain
	scans     []*segScan
	queues    []*queueCheck
	index     []*indexCheck
	logBad    bool     // the CommitLog's files are off: nothing can be repaired automatically
	configBad []string // config files that cannot be read (config.go): repaired by hand only
	unindexed int64    // the first record with keys the index does not reach, or -1
}

func (v *verifier) note(format string, args ...any) {
	v.rep.Notes = append(v.rep.Notes, fmt.Sprintf(format, args...))
}

// Verify checks the store in opts.Dir, read-only and without its lock, so that it may run next
// to an engine (whose newest data may then be in flight). It checks:
//
//   - the CommitLog: every record (structure, BODYCRC, the whole-record CRC, PHYSICALOFFSET =
//     its position), the blank fillers at segment ends, and that the data ends cleanly, zeros
//     after the last record; a bad record is a torn tail, or corruption when it lies below the
//     checkpoint's durable offset or valid segments follow it. The queue offsets of each queue's
//     records must follow one another.
//   - the ConsumeQueues: every unit names a record of the valid log that belongs to its queue at
//     its queue offset, with its size and tags code; units are sorted by physical offset; and
//     every normal or committed record has its unit (the records of each queue are counted and
//     compared with the units that name them).
//   - the IndexFiles: every entry names a record with a key of the entry's hash; the hash
//     chains are well formed (links go to older entries of the same slot, every entry is on
//     exactly one chain, each slot leads to the newest of its chain); the header agrees; and
//     the index reaches the last record with keys.
//   - the checkpoint: it decodes, its offsets lie within the valid data, the dispatched one on
//     a record boundary, its timestamps no later than the newest record.
//   - the config files a start needs (config.go): each decodes, or its backup does.
//
// Problems go into the Report; an error means the check could not be done (the store missing,
// an I/O error, ctx done).
func Verify(ctx context.Context, opts Options) (*Report, error) {
	v, err := run(ctx, opts, false)
	if v == nil {
		return nil, err
	}
	return v.rep, err
}

// run is Verify; locked says the caller holds the store's lock (Repair): no engine runs.
func run(ctx context.Context, opts Options, locked bool) (*verifier, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := isStore(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	v := &verifier{
		opts:      opts,
		ro:        roFS{ReadOnlyFS: vfs.ReadOnlyFS{FS: opts.FS, Err: errReadOnly}, hide: make(map[string]bool)},
		rep:       &Report{Store: opts.Dir, Started: time.Now()},
		problems:  newCollector(opts.MaxProblems),
		unindexed: -1,
	}
	v.rep.CommitLog.SegmentSize = opts.CommitLogFileSize
	defer func() {
		if v.log != nil {
			v.log.Close()
		}
	}()
	if ok, err := meta.AbortExists(opts.FS, opts.Dir); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	} else if ok {
		v.rep.AbortPresent = true
		if !locked {
			v.note("the abort marker is present: an engine is running, and the newest data may be in flight (problems at the end of the log or of the queues may then be transient), or the last one did not stop cleanly (its recovery, or repair, brings the derived files in line)")
		} else {
			v.note("the abort marker is present: the last engine did not stop cleanly")
		}
	}
	err = v.verify(ctx)
	v.problems.finish(v.rep)
	v.rep.Index.Expired = v.expired.Load()
	v.rep.Took = time.Since(v.rep.Started)
	v.rep.Verdict = v.verdict()
	return v, err
}

// isStore checks that dir looks like a store: a directory with at least one of the files or
// directories an engine creates, so that a mistyped --store is not reported as a consistent,
// empty store.
func isStore(fsys vfs.FS, dir string) error {
	st, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w at %s", ErrNoStore, dir)
	case err != nil:
		return fmt.Errorf("verify: %w", err)
	case !st.IsDir:
		return fmt.Errorf("%w at %s: not a directory", ErrNoStore, dir)
	}
	for _, name := range []string{"commitlog", "consumequeue", "index", checkpoint.FileName, meta.LockFileName} {
		if _, err := fsys.Stat(path.Join(dir, name)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w at %s: no commitlog, consumequeue, index, checkpoint or lock in it", ErrNoStore, dir)
}

func (v *verifier) verify(ctx context.Context) error {
	cp, cpOK := v.loadCheckpoint()
	var durable, dispatched int64 = 0, -1
	if cpOK && cp.Ext.Valid {
		durable, dispatched = cp.Ext.DurableOffset, cp.Ext.DispatchedOffset
		v.rep.Checkpoint.PropCRCFrom = cp.Ext.PropCRCFrom
	}
	if cpOK && !v.opts.NoPropCRC {
		v.rule = cp.PropCRCRule()
	}
	lr := &v.rep.CommitLog
	lr.PropCRC, lr.PropCRCFrom, lr.PropCRCTo = "where present", v.rule.From, v.rule.To
	if !v.rule.Empty() {
		lr.PropCRC = "required in range"
	}

	// The CommitLog.
	size := v.opts.CommitLogFileSize
	l, err := listSegments(v.opts.FS, v.logDir(), size)
	if err != nil {
		return fmt.Errorf("verify: list %s: %w", v.logDir(), err)
	}
	for _, b := range l.bad {
		v.problems.add(Problem{Kind: KindLogFile, File: v.rel(b.file), Desc: b.desc})
	}
	if l.empty != "" {
		v.ro.hide[l.empty] = true
		v.note("%s is empty: a segment whose creation was cut short; the engine deletes it", v.rel(l.empty))
	}
	v.rep.CommitLog.Segments = len(l.files)
	if len(l.bad) > 0 {
		v.logBad = true
		v.note("nothing else was checked: the CommitLog's files must be fixed by hand first")
		return nil
	}
	v.log, err = commitlog.OpenLog(commitlog.LogOptions{FS: v.ro, Dir: v.logDir(), FileSize: size, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	files := v.log.Queue().Files()
	v.scans = v.scanLog(ctx, files, dispatched)
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, s := range v.scans {
		if s.err != nil {
			return fmt.Errorf("verify: %s: %w", s.name, s.err)
		}
		v.rep.CommitLog.Scanned += size
	}
	c := v.assemble(v.scans)
	v.chain = c
	v.checkChain(c, durable)
	v.checkQueueOffsets(c)

	// The ConsumeQueues.
	store, err := consumequeue.Open(consumequeue.Options{
		FS: v.ro, Root: v.opts.Dir, UnitsPerFile: v.opts.ConsumeQueueUnits, ReadOnly: true,
	})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer store.Close()
	skipped, err := store.Load()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, s := range skipped {
		v.note("%s is not a queue directory; the engine ignores it", v.rel(s))
	}
	v.queues = v.queueList(c, store)
	v.checkQueues(ctx, v.queues, c)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := v.checkCounts(ctx, v.queues, c); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	qr := &v.rep.ConsumeQueue
	for _, q := range v.queues {
		if q.cq != nil {
			qr.Queues++
		}
		qr.Units += q.units
		if q.log != nil {
			qr.Records += q.log.count
		}
	}

	// The IndexFiles.
	if v.opts.NoIndex {
		v.note("the index was not checked (the store is written without one)")
	} else {
		names, err := v.listIndex()
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		v.index = v.checkIndex(ctx, names, c)
		if err := ctx.Err(); err != nil {
			return err
		}
		if v.unindexed, err = v.checkIndexReach(ctx, v.index, c); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		ir := &v.rep.Index
		ir.Checked, ir.Files = true, len(names)
		for _, x := range v.index {
			ir.Entries += x.entries
		}
	}

	// The checkpoint.
	v.checkCheckpoint(cp, cpOK, c, v.scans)

	// The config files a start needs.
	v.checkConfig()
	return nil
}

// verdict sums the problems up.
func (v *verifier) verdict() string {
	r := v.rep
	switch {
	case r.Consistent():
		return VerdictConsistent
	case r.Counts[KindLogCorrupt] > 0 || r.Counts[KindLogFile] > 0 || r.Counts[KindLogQueueOffset] > 0 ||
		r.Counts[KindConfig] > 0:
		return VerdictCorrupt
	}
	return VerdictInconsistent
}
