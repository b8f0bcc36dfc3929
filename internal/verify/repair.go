package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// RepairReport says what Repair found and what it changed.
type RepairReport struct {
	// Before is the verification under the lock that the repair is based on; After the one
	// run once the repair is done (nil when nothing was changed or the repair failed).
	Before *Report `json:"before"`
	After  *Report `json:"after,omitempty"`
	// Needed says Before found problems.
	Needed bool `json:"needed"`
	// Plan is what the repair removes, worked out before anything was changed; DryRun says it
	// was only worked out.
	Plan   *Plan `json:"plan,omitempty"`
	DryRun bool  `json:"dry_run,omitempty"`

	// Cut is what was cut from the CommitLog; nil when the log was kept whole.
	Cut *Cut `json:"cut,omitempty"`
	// Queues lists every ConsumeQueue that changed.
	Queues []QueueRepair `json:"queues,omitempty"`
	// IndexDeleted are the IndexFiles deleted (broken ones and every later one, and those
	// holding entries past the cut); IndexCreated the ones the rebuild wrote.
	IndexDeleted []string `json:"index_deleted,omitempty"`
	IndexCreated []string `json:"index_created,omitempty"`
	// Redispatched is the CommitLog range run through derive's Builder to rebuild what was
	// deleted or missing, and how many records it holds.
	Redispatched *Range `json:"redispatched,omitempty"`
	// OldCheckpoint is the checkpoint that was there (nil if none could be read) and
	// Checkpoint the one written.
	OldCheckpoint *CheckpointReport `json:"old_checkpoint,omitempty"`
	Checkpoint    CheckpointReport  `json:"checkpoint"`
	// AbortRemoved says the abort marker was removed: the store is left as after a clean stop.
	AbortRemoved bool `json:"abort_removed"`
}

// Cut is what was cut from the CommitLog.
type Cut struct {
	// Drop is what Verify measured: the byte range cut in the segment of the cut, the records
	// that parse there, the later segments and their records. Sealed says acknowledged data
	// was lost.
	Drop
	// End is the log's new end; Zeroed bounds the bytes zeroed after it in its segment.
	End    int64 `json:"end"`
	Zeroed int64 `json:"zeroed"`
	// Deleted are the segment files deleted (the later ones).
	Deleted []string `json:"deleted,omitempty"`
}

// Range is a CommitLog range.
type Range struct {
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
}

// QueueRepair is what happened to one ConsumeQueue.
type QueueRepair struct {
	Queue string `json:"queue"` // topic/queueId
	// Rebuilt says its files were deleted (its units did not all name their records) and the
	// queue was built anew from the CommitLog.
	Rebuilt bool `json:"rebuilt"`
	// Dropped is how many units went (all of a rebuilt queue's, or those past the log's end);
	// Added how many the rebuild wrote. Unreadable says the queue's files could not be read,
	// so that its dropped units are not known.
	Dropped    int64 `json:"dropped"`
	Added      int64 `json:"added"`
	Unreadable bool  `json:"unreadable,omitempty"`
}

// ErrNotRepairable is returned, before anything is changed, for damage Repair cannot fix.
var ErrNotRepairable = errors.New("verify: cannot repair")

// Repair makes the store consistent again, the way the engine's recovery does but without
// stopping at damage to sealed data: it takes the store's lock (failing with the
// meta.InUseError of LockStore when an engine runs), verifies the store, and if anything is
// wrong, works out its Plan (every removal, with its file, range, count and reason) and tells
// it to Options.OnPlan before changing anything. It stops there with Options.DryRun, and
// refuses with ErrNotRepairable when the cut would remove records RocketMQ's own recovery keeps
// (Plan.RocketMQKeeps) unless Options.ForceCut. Then it:
//
//   - cuts the CommitLog at the first invalid record, deleting later segments and zeroing the
//     rest of the segment (commitlog.Log.Recover with Sealed 0: the engine's recovery refuses
//     to cut below the durable offset, repair is the explicit decision to do it; what is lost
//     is in Cut);
//   - deletes the ConsumeQueues whose units do not name their records and the IndexFiles from
//     the first broken one on, drops units and index files that point past the new end, and
//     rebuilds what is missing by running the CommitLog through derive's Builder, the code
//     path of the engine's dispatch and recovery;
//   - flushes everything, writes the checkpoint (durable = dispatched = the end) and removes
//     the abort marker, so that the engine opens the store as after a clean stop.
//
// It then verifies the store again (After). Damage it cannot fix (CommitLog files of the
// wrong size or missing, records whose queue offsets do not follow one another) fails with
// ErrNotRepairable before anything changes.
func Repair(ctx context.Context, opts Options) (*RepairReport, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := isStore(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	lock, err := meta.LockStore(opts.FS, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRepairable, err)
	}
	defer lock.Close()
	v, err := run(ctx, opts, true)
	if err != nil {
		return nil, err
	}
	rep := &RepairReport{Before: v.rep}
	if v.rep.Consistent() {
		return rep, nil
	}
	rep.Needed = true
	if err := v.repairable(); err != nil {
		return rep, err
	}
	rep.Plan = v.plan()
	if opts.OnPlan != nil {
		opts.OnPlan(v.rep, rep.Plan)
	}
	if k := rep.Plan.RocketMQKeeps; k != nil && !opts.ForceCut {
		return rep, fmt.Errorf("%w %s: cutting the CommitLog at %d would remove %d records in [%d, %d) that RocketMQ's own recovery keeps (they fail only the engine's stricter checks: %s); nothing was changed; repair with --force-cut to cut them anyway",
			ErrNotRepairable, opts.Dir, k.From, k.Records, k.From, k.To, v.rep.CommitLog.TailReason)
	}
	if opts.DryRun {
		rep.DryRun = true
		return rep, nil
	}
	r := &repairer{v: v, opts: opts, rep: rep}
	if err := r.repair(ctx); err != nil {
		return rep, fmt.Errorf("verify: repair %s: %w", opts.Dir, err)
	}
	after, err := run(ctx, opts, true)
	if after != nil {
		rep.After = after.rep
	}
	return rep, err
}

// repairable refuses what Repair cannot fix.
func (v *verifier) repairable() error {
	if v.logBad {
		return fmt.Errorf("%w %s: the CommitLog's files are not a sequence of whole segments (see the commitlog-file problems); move the odd files away by hand first",
			ErrNotRepairable, v.opts.Dir)
	}
	if v.chain == nil {
		return fmt.Errorf("%w %s: the CommitLog was not read", ErrNotRepairable, v.opts.Dir)
	}
	if len(v.configBad) > 0 {
		return fmt.Errorf("%w %s: %s in %s cannot be read (see the config problems, which say what to do with them); nothing was changed",
			ErrNotRepairable, v.opts.Dir, strings.Join(v.configBad, ", "), meta.ConfigDirName)
	}
	for topic, byID := range v.chain.queues {
		for id, q := range byID {
			if q.gaps > 0 {
				return fmt.Errorf("%w %s: the records of queue %s/%d have queue offsets that do not follow one another (at %d: %d after %d), from which no ConsumeQueue can be built",
					ErrNotRepairable, v.opts.Dir, topic, id, q.gapPhys, q.gapGot, q.gapWant-1)
			}
		}
	}
	return nil
}

// repairer is one run of the repair steps.
type repairer struct {
	v    *verifier
	opts Options
	rep  *RepairReport

	log   *commitlog.Log
	cq    *consumequeue.Store
	index *indexfile.Service
	end   int64
}

func (r *repairer) repair(ctx context.Context) (err error) {
	defer func() { err = errors.Join(err, r.close()) }()
	c := r.v.chain
	r.end = c.end
	if err := r.cutLog(); err != nil {
		return err
	}
	if err := r.syncLog(); err != nil {
		return err
	}
	rebuilt, err := r.deleteBroken()
	if err != nil {
		return err
	}
	if err := r.openDerived(); err != nil {
		return err
	}
	units, err := r.cutDerived(rebuilt)
	if err != nil {
		return err
	}
	if err := r.redispatch(ctx); err != nil {
		return err
	}
	if err := r.cq.CorrectMinOffsetAll(r.log.MinOffset()); err != nil {
		return err
	}
	if err := r.cq.FlushAll(0); err != nil {
		return err
	}
	if r.index != nil {
		if err := r.index.Flush(); err != nil {
			return err
		}
	}
	r.reportQueues(units, rebuilt)
	if err := r.writeCheckpoint(); err != nil {
		return err
	}
	if r.v.rep.AbortPresent {
		if err := meta.RemoveAbort(r.opts.FS, r.opts.Dir); err != nil {
			return err
		}
		r.rep.AbortRemoved = true
	}
	return nil
}

func (r *repairer) close() error {
	var errs []error
	if r.index != nil {
		errs = append(errs, r.index.Close())
	}
	if r.cq != nil {
		errs = append(errs, r.cq.Close())
	}
	if r.log != nil {
		errs = append(errs, r.log.Close())
	}
	r.index, r.cq, r.log = nil, nil, nil
	return errors.Join(errs...)
}

// cutLog opens the CommitLog for writing and, when its data does not end cleanly, cuts it at
// the end Verify found, with the engine's own recovery code: Recover rescans the segment of
// the end with the same checks, deletes the later segments and zeroes what follows the end.
// Sealed is 0 because repair is the explicit decision to cut below the durable offset, which
// Recover would otherwise refuse.
func (r *repairer) cutLog() error {
	var err error
	r.log, err = commitlog.OpenLog(commitlog.LogOptions{
		FS: r.opts.FS, Dir: r.v.logDir(), FileSize: r.opts.CommitLogFileSize,
	})
	if err != nil {
		return err
	}
	c := r.v.chain
	if c.stop == nil || c.full || (c.stop.tail != commitlog.TailCorrupt && len(c.after) == 0) {
		return nil
	}
	var before []string
	for _, f := range r.log.Queue().Files() {
		before = append(before, f.Name())
	}
	res, err := r.log.Recover(commitlog.RecoverOptions{From: c.stop.base, Check: r.opts.check(), PropCRC: r.v.rule})
	if err != nil {
		return fmt.Errorf("cut the CommitLog: %w", err)
	}
	if res.End != c.end {
		return fmt.Errorf("cut the CommitLog: recovery ends the log at %d, verification at %d", res.End, c.end)
	}
	cut := &Cut{Drop: *r.v.rep.CommitLog.Drop, End: res.End, Zeroed: res.Cut}
	kept := make(map[string]bool)
	for _, f := range r.log.Queue().Files() {
		kept[f.Name()] = true
	}
	for _, name := range before {
		if !kept[name] {
			cut.Deleted = append(cut.Deleted, r.v.rel(name))
		}
	}
	r.rep.Cut = cut
	return nil
}

// syncLog makes the valid data durable before the checkpoint says it is: pages a crashed
// engine wrote may still be only in the page cache. A fresh mapping's msync writes back the
// file's dirty pages whoever dirtied them; clean pages cost nothing.
func (r *repairer) syncLog() error {
	size := r.opts.CommitLogFileSize
	for _, f := range r.log.Queue().Files() {
		if f.Base() >= r.end {
			break
		}
		seg, err := r.opts.FS.OpenSegment(f.Name(), size, vfs.ReadWrite)
		if err != nil {
			return err
		}
		err = seg.Sync(0, min(size, r.end-f.Base()))
		if cerr := seg.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteBroken deletes the files of the queues whose units do not all name their records and
// the IndexFiles from the first broken one on. It returns the queues deleted.
func (r *repairer) deleteBroken() (map[string]*queueCheck, error) {
	rebuilt := make(map[string]*queueCheck)
	fsys := r.opts.FS
	for _, q := range r.v.queues {
		if !q.broken() {
			continue
		}
		if err := removeDir(fsys, q.dir); err != nil {
			return nil, err
		}
		if err := fsys.SyncDir(path.Dir(q.dir)); err != nil {
			return nil, err
		}
		rebuilt[q.String()] = q
	}
	first := slices.IndexFunc(r.v.index, func(x *indexCheck) bool { return x == nil || x.broken() })
	if first < 0 {
		return rebuilt, nil
	}
	for _, x := range r.v.index[first:] {
		if x == nil {
			continue
		}
		if err := fsys.Remove(x.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		r.rep.IndexDeleted = append(r.rep.IndexDeleted, r.v.rel(x.name))
	}
	return rebuilt, fsys.SyncDir(path.Join(r.opts.Dir, "index"))
}

// removeDir removes the files of dir, then dir.
func removeDir(fsys vfs.FS, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir {
			return fmt.Errorf("%s: unexpected directory %s", dir, e.Name)
		}
		if err := fsys.Remove(path.Join(dir, e.Name)); err != nil {
			return err
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	return fsys.Remove(dir)
}

// openDerived opens the ConsumeQueues and the index for writing, as the engine does.
func (r *repairer) openDerived() error {
	var err error
	if r.cq, err = consumequeue.Open(consumequeue.Options{FS: r.opts.FS, Root: r.opts.Dir, UnitsPerFile: r.opts.ConsumeQueueUnits}); err != nil {
		return err
	}
	if _, err := r.cq.Load(); err != nil {
		return err
	}
	if _, err := r.cq.RecoverAll(); err != nil {
		return err
	}
	if r.opts.NoIndex {
		return nil
	}
	r.index, err = indexfile.Open(indexfile.Options{FS: r.opts.FS, Dir: path.Join(r.opts.Dir, "index"), Geometry: r.opts.geometry()})
	return err
}

// queueUnits are a queue's unit counts at the steps of the repair.
type queueUnits struct {
	recovered, truncated int64
}

// cutDerived drops the units and IndexFiles that point past the log's end, as the engine's
// recovery does.
func (r *repairer) cutDerived(rebuilt map[string]*queueCheck) (map[string]*queueUnits, error) {
	units := make(map[string]*queueUnits)
	for _, cq := range r.cq.Queues() {
		units[cq.String()] = &queueUnits{recovered: cq.MaxOffset() - cq.MinOffset()}
	}
	if err := r.cq.TruncateDirtyAll(r.end); err != nil {
		return nil, err
	}
	// The rebuild appends to the queues that lack units: whatever lies past their end must not
	// join them.
	for _, q := range r.v.queues {
		if q.missing == 0 || q.broken() {
			continue
		}
		if cq := r.cq.Find(q.topic, q.id); cq != nil {
			if err := cq.ZeroPastEnd(); err != nil {
				return nil, err
			}
		}
	}
	for _, cq := range r.cq.Queues() {
		units[cq.String()].truncated = cq.MaxOffset() - cq.MinOffset()
	}
	if r.index == nil {
		return units, nil
	}
	dropped, _, err := r.index.DropPast(r.end)
	for _, name := range dropped {
		r.rep.IndexDeleted = append(r.rep.IndexDeleted, r.v.rel(name))
	}
	return units, err
}

// redispatch runs the CommitLog through derive's Builder from the first record whose unit or
// index entries are missing now: the records of the rebuilt queues, the records without units,
// those the deleted IndexFiles held and those the index never reached. The Builder skips what
// the queues and the index hold already.
func (r *repairer) redispatch(ctx context.Context) error {
	v := r.v
	from := r.end
	for _, q := range v.queues {
		switch {
		case q.log == nil:
		case q.broken():
			from = min(from, q.log.firstPhys)
		case q.firstMissing >= 0:
			from = min(from, q.firstMissing)
		}
	}
	if r.index != nil {
		if v.unindexed >= 0 {
			from = min(from, v.unindexed)
		}
		if len(r.rep.IndexDeleted) > 0 {
			// What the deleted files held is rebuilt from the end of the last file kept (or
			// the log's start); the Builder skips what that file holds.
			start := v.chain.start
			if files := r.index.Files(); len(files) > 0 {
				start = max(start, files[len(files)-1].EndPhyOffset())
			}
			from = min(from, start)
		}
	}
	from = max(from, r.log.MinOffset())
	if from >= r.end {
		return nil
	}
	var names map[string]bool
	if r.index != nil {
		names = make(map[string]bool)
		for _, f := range r.index.Files() {
			names[f.Name()] = true
		}
	}
	b := derive.NewBuilder(r.cq, r.index, nil)
	var n int64
	_, err := r.log.Each(from, r.end, commitlog.Check{NoBodyCRC: true, NoPropCRC: true}, func(phys int64, rec commitlog.View) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		return b.Apply(phys, rec)
	})
	if err != nil {
		return fmt.Errorf("rebuild from %d: %w", from, err)
	}
	r.rep.Redispatched = &Range{From: from, To: r.end, Records: n}
	if r.index != nil {
		for _, f := range r.index.Files() {
			if !names[f.Name()] {
				r.rep.IndexCreated = append(r.rep.IndexCreated, r.v.rel(f.Name()))
			}
		}
	}
	return nil
}

// reportQueues lists the queues that changed.
func (r *repairer) reportQueues(units map[string]*queueUnits, rebuilt map[string]*queueCheck) {
	for _, cq := range r.cq.Queues() {
		key := cq.String()
		now := cq.MaxOffset() - cq.MinOffset()
		qr := QueueRepair{Queue: key}
		if q := rebuilt[key]; q != nil {
			qr.Rebuilt, qr.Dropped, qr.Added, qr.Unreadable = true, q.max-q.min, now, q.fileBad
		} else if u := units[key]; u != nil {
			qr.Dropped, qr.Added = u.recovered-u.truncated, now-u.truncated
		} else {
			qr.Added = now
		}
		if qr.Rebuilt || qr.Dropped != 0 || qr.Added != 0 {
			r.rep.Queues = append(r.rep.Queues, qr)
		}
	}
	for key, q := range rebuilt { // deleted and not rebuilt: no record of it is left
		if r.cq.Find(q.topic, q.id) == nil {
			r.rep.Queues = append(r.rep.Queues, QueueRepair{Queue: key, Rebuilt: true, Dropped: q.max - q.min, Unreadable: q.fileBad})
		}
	}
	slices.SortFunc(r.rep.Queues, func(a, b QueueRepair) int { return compareQueues(a.Queue, b.Queue) })
}

// compareQueues orders "topic/id" names by topic, then numerically by id.
func compareQueues(a, b string) int {
	ta, ia := splitQueue(a)
	tb, ib := splitQueue(b)
	if ta != tb {
		if ta < tb {
			return -1
		}
		return 1
	}
	return ia - ib
}

func splitQueue(s string) (string, int) {
	i := len(s) - 1
	for i >= 0 && s[i] != '/' {
		i--
	}
	if i < 0 {
		return s, 0
	}
	n, _ := strconv.Atoi(s[i+1:])
	return s[:i], n
}

// writeCheckpoint writes what the engine's checkpointer writes after a thorough flush:
// everything below the end is durable and dispatched.
func (r *repairer) writeCheckpoint() error {
	if old := r.v.rep.Checkpoint; old.Present {
		r.rep.OldCheckpoint = &old
	}
	ts := r.v.chain.lastTS
	var indexTS int64
	if r.index != nil {
		for _, f := range r.index.Files() {
			if f.Full() {
				indexTS = max(indexTS, f.EndTimestamp())
			}
		}
	}
	cp := checkpoint.Checkpoint{
		PhysicMsgTimestamp: ts,
		LogicsMsgTimestamp: ts,
		IndexMsgTimestamp:  indexTS,
		Ext: checkpoint.Ext{Valid: true, DurableOffset: r.end, DispatchedOffset: r.end,
			PropCRCFrom: r.rep.Plan.PropCRCFrom},
	}
	if err := checkpoint.Save(r.opts.FS, path.Join(r.opts.Dir, checkpoint.FileName), cp); err != nil {
		return err
	}
	r.rep.Checkpoint = CheckpointReport{
		Present: true, PhysicMsgTimestamp: ts, LogicsMsgTimestamp: ts, IndexMsgTimestamp: cp.IndexMsgTimestamp,
		Extension: true, DurableOffset: r.end, DispatchedOffset: r.end, PropCRCFrom: cp.Ext.PropCRCFrom,
	}
	return nil
}
