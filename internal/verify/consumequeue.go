package verify

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// queueCheck is what was found about one (topic, queue): its records in the CommitLog and its
// ConsumeQueue. Repair decides from it what to do with the queue.
type queueCheck struct {
	topic string
	id    int32
	dir   string
	log   *qsum                      // its records in the valid log; nil if none
	cq    *consumequeue.ConsumeQueue // nil if the queue has no directory
	// min and max are the queue offsets the queue holds, [min, max).
	min, max int64
	units    int64 // units checked
	matched  int64 // units that name their record
	pastEnd  int64 // units pointing past the log's end
	// firstPastEnd is the first of them (queue offset) and its unit.
	firstPastEnd     int64
	firstPastEndUnit consumequeue.Unit
	bad              int64 // units wrong for any other reason
	// fileBad says the queue's files cannot be read as they are (wrong sizes, gaps).
	fileBad bool
	// holes says records lack a unit below the queue's end, where no unit can be appended.
	holes bool
	// missing counts the records without a unit; firstMissing is the first of them (-1).
	missing      int64
	firstMissing int64
}

func (q *queueCheck) String() string { return q.topic + "/" + strconv.Itoa(int(q.id)) }

// broken says the queue must be deleted and built anew from the CommitLog: units that name the
// wrong record, or are missing below the end, cannot be fixed in place. Units past the end are
// cut and missing units at the end are appended without that.
func (q *queueCheck) broken() bool { return q.bad > 0 || q.fileBad || q.holes }

// queueList is every queue that has records in the log or a directory on disk, sorted.
func (v *verifier) queueList(c *chain, store *consumequeue.Store) []*queueCheck {
	byKey := make(map[string]*queueCheck)
	key := func(topic string, id int32) string { return topic + "\x00" + strconv.Itoa(int(id)) }
	get := func(topic string, id int32) *queueCheck {
		k := key(topic, id)
		q := byKey[k]
		if q == nil {
			q = &queueCheck{topic: topic, id: id, firstMissing: -1,
				dir: path.Join(v.opts.Dir, "consumequeue", topic, strconv.Itoa(int(id)))}
			byKey[k] = q
		}
		return q
	}
	for topic, byID := range c.queues {
		for id, s := range byID {
			get(topic, id).log = s
		}
	}
	if store != nil {
		for _, cq := range store.Queues() {
			get(cq.Topic(), cq.QueueID()).cq = cq
		}
	}
	out := make([]*queueCheck, 0, len(byKey))
	for _, q := range byKey {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *queueCheck) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id))
	})
	return out
}

// checkQueues checks every unit of every queue against the record it names, in parallel.
func (v *verifier) checkQueues(ctx context.Context, qs []*queueCheck, c *chain) {
	fileSize := int64(v.opts.ConsumeQueueUnits) * consumequeue.UnitSize
	// Layout first (cheap): the store packages refuse a queue whose files are off, and the
	// read-only store hides a wrong-size last file, which a writer would refuse.
	for _, q := range qs {
		if q.cq == nil {
			continue
		}
		l, err := listSegments(v.opts.FS, q.dir, fileSize)
		if err != nil {
			q.fileBad = true
			v.problems.add(Problem{Kind: KindCQFile, File: v.rel(q.dir), Desc: fmt.Sprintf("queue %s: %v", q, err)})
			continue
		}
		for _, b := range l.bad {
			q.fileBad = true
			v.problems.add(Problem{Kind: KindCQFile, File: v.rel(b.file), Desc: fmt.Sprintf("queue %s: %s", q, b.desc)})
		}
	}
	m := newMeter(v.opts.Progress, PhaseConsumeQueue, int64(len(qs)))
	defer m.finish()
	bufs := sync.Pool{New: func() any { return new([256]consumequeue.Unit) }}
	parallel(ctx, v.opts.Workers, len(qs), func(i int) {
		if q := qs[i]; q.cq != nil && !q.fileBad {
			buf := bufs.Get().(*[256]consumequeue.Unit)
			v.checkQueue(q, c, buf[:])
			bufs.Put(buf)
		}
		m.report(1)
	})
}

// checkQueue checks the units of one queue.
func (v *verifier) checkQueue(q *queueCheck, c *chain, buf []consumequeue.Unit) {
	cq := q.cq
	if err := cq.CorrectMinOffset(c.start); err != nil {
		q.fileBad = true
		v.problems.add(Problem{Kind: KindCQFile, File: v.rel(q.dir), Desc: fmt.Sprintf("queue %s: %v", q, err)})
		return
	}
	q.min, q.max = cq.MinOffset(), cq.MaxOffset()
	prev := int64(-1)
	for n := q.min; n < q.max; {
		k, err := cq.Read(n, buf)
		if err != nil || k == 0 {
			q.fileBad = true
			v.problems.add(Problem{Kind: KindCQFile, File: v.rel(v.cqFile(q, n)), Offset: n * consumequeue.UnitSize,
				Desc: fmt.Sprintf("queue %s: unit %d cannot be read: %v", q, n, err)})
			return
		}
		for i := range k {
			v.checkUnit(q, n+int64(i), buf[i], &prev, c)
		}
		n += int64(k)
		q.units += int64(k)
	}
	v.checkQueueTail(q)
	if q.pastEnd > 0 {
		// One problem for them all: they are what a cut of the log leaves behind.
		n, u := q.firstPastEnd, q.firstPastEndUnit
		v.problems.add(Problem{Kind: KindCQPastEnd, File: v.rel(v.cqFile(q, n)), Offset: n * consumequeue.UnitSize,
			Desc: fmt.Sprintf("queue %s: %d units from unit %d {phys %d, size %d} on point past the end of the valid CommitLog at %d",
				q, q.pastEnd, n, u.Phys, u.Size, c.end)})
	}
}

// checkQueueTail looks past the end of the queue in the file that holds it: a unit there that
// passes the recovery test is stale (recovery stopped at a lost unit before it, and does not
// zero what follows). Invisible now, it comes back as soon as the queue is written up to it.
func (v *verifier) checkQueueTail(q *queueCheck) {
	fileSize := int64(v.opts.ConsumeQueueUnits) * consumequeue.UnitSize
	end := q.max * consumequeue.UnitSize
	if end%fileSize == 0 {
		return // the end is a file boundary: recovery deletes any later file
	}
	name := v.cqFile(q, q.max)
	seg, err := v.ro.OpenSegment(name, fileSize, vfs.ReadOnly)
	if err != nil {
		return // no such file: the queue is empty (reported otherwise if it should not be)
	}
	defer seg.Close()
	data := seg.Data()
	for pos := end%fileSize + consumequeue.UnitSize; pos+consumequeue.UnitSize <= fileSize; pos += consumequeue.UnitSize {
		if u := consumequeue.DecodeUnit(data[pos:]); u.Valid() {
			n := (end - end%fileSize + pos) / consumequeue.UnitSize
			q.bad++
			v.problems.add(Problem{Kind: KindCQUnit, File: v.rel(name), Offset: n * consumequeue.UnitSize,
				Desc: fmt.Sprintf("queue %s: unit %d {phys %d, size %d} lies past the queue's end at %d, after a unit that is not valid: it comes back once the queue is written up to it",
					q, n, u.Phys, u.Size, q.max)})
			return
		}
	}
}

// cqFile is the path of the file holding unit n of q.
func (v *verifier) cqFile(q *queueCheck, n int64) string {
	fileSize := int64(v.opts.ConsumeQueueUnits) * consumequeue.UnitSize
	pos := n * consumequeue.UnitSize
	return path.Join(q.dir, segment.Name(pos-pos%fileSize))
}

// checkUnit checks unit n of q: it must name, at a position above the previous unit's, a
// record of the valid log that belongs to q at queue offset n, with the record's size and
// tags code.
func (v *verifier) checkUnit(q *queueCheck, n int64, u consumequeue.Unit, prev *int64, c *chain) {
	bad := func(kind Kind, format string, args ...any) {
		q.bad++
		v.problems.add(Problem{Kind: kind, File: v.rel(v.cqFile(q, n)), Offset: n * consumequeue.UnitSize,
			Desc: fmt.Sprintf("queue %s unit %d {phys %d, size %d, tags %d}: ", q, n, u.Phys, u.Size, u.TagsCode) + fmt.Sprintf(format, args...)})
	}
	switch {
	case u.IsBlank():
		bad(KindCQUnit, "a pre-blank filler inside the queue, naming no record")
		return
	case !u.Valid():
		bad(KindCQUnit, "not a valid unit (offset < 0 or size <= 0)")
		return
	case u.Phys <= *prev:
		bad(KindCQOrder, "not after the unit before it, at %d", *prev)
		*prev = u.Phys
		return
	}
	*prev = u.Phys
	switch {
	case u.Phys < c.start:
		bad(KindCQUnit, "points below the CommitLog's first offset %d", c.start)
		return
	case u.Phys >= c.end:
		// What a cut of the log leaves behind; the engine's recovery drops these. (A unit that
		// starts below the end and runs past it has the wrong size, found below.)
		if q.pastEnd == 0 {
			q.firstPastEnd, q.firstPastEndUnit = n, u
		}
		q.pastEnd++
		return
	}
	rec, release, err := v.log.Read(u.Phys)
	if err != nil {
		bad(KindCQUnit, "no record there: %s", reasonText(err))
		return
	}
	defer release()
	switch tx := rec.TransactionType(); {
	case rec.PhysicalOffset() != u.Phys:
		bad(KindCQUnit, "no record starts there")
	case string(rec.Topic()) != q.topic || rec.QueueID() != q.id:
		bad(KindCQUnit, "names a record of queue %s/%d", rec.Topic(), rec.QueueID())
	case rec.QueueOffset() != n:
		bad(KindCQUnit, "names the record with queue offset %d", rec.QueueOffset())
	case rec.TotalSize() != int(u.Size):
		bad(KindCQUnit, "size differs from the record's TOTALSIZE %d", rec.TotalSize())
	case !derive.Queued(tx):
		bad(KindCQUnit, "names a prepared or rolled-back transaction message, which has no unit")
	default:
		if tags := derive.TagsCode(derive.PropsOf(rec), rec.StoreTimestamp(), nil); tags != u.TagsCode {
			bad(KindCQUnit, "tags code differs from the record's %d", tags)
			return
		}
		q.matched++
	}
}

// checkCounts compares, queue by queue, the records that should have a unit with the units
// that name them, and finds the records without one.
func (v *verifier) checkCounts(ctx context.Context, qs []*queueCheck, c *chain) error {
	flagged := make(map[string]map[int32]*queueCheck)
	from := c.end
	for _, q := range qs {
		if q.log == nil || q.log.count == q.matched {
			continue
		}
		if flagged[q.topic] == nil {
			flagged[q.topic] = make(map[int32]*queueCheck)
		}
		flagged[q.topic][q.id] = q
		from = min(from, q.log.firstPhys)
	}
	if len(flagged) == 0 || from >= c.end {
		return nil
	}
	// One walk over the log from the first record concerned: each record of a flagged queue
	// looks its unit up. Runs of missing units are reported as one problem each.
	type run struct {
		phys, firstQO, lastQO int64
		n                     int64
	}
	runs := make(map[*queueCheck]*run)
	flush := func(q *queueCheck) {
		r := runs[q]
		if r == nil {
			return
		}
		delete(runs, q)
		desc := fmt.Sprintf("queue %s: the record with queue offset %d has no unit", q, r.firstQO)
		if r.n > 1 {
			desc = fmt.Sprintf("queue %s: %d records with queue offsets %d to %d (the first here) have no unit", q, r.n, r.firstQO, r.lastQO)
		}
		switch {
		case q.cq == nil:
			desc += "; the queue has no ConsumeQueue"
		case q.fileBad:
			desc += "; its ConsumeQueue files cannot be read"
		default:
			desc += fmt.Sprintf("; the ConsumeQueue holds queue offsets [%d, %d)", q.min, q.max)
		}
		v.problems.add(Problem{Kind: KindCQMissing, File: v.rel(v.segmentName(r.phys)), Offset: r.phys, Desc: desc})
	}
	chk := commitlog.Check{NoBodyCRC: true, NoPropCRC: true} // checked by the scan already
	var steps int
	_, err := v.log.Each(from, c.end, chk, func(phys int64, rec commitlog.View) error {
		if steps++; steps%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if !derive.Queued(rec.TransactionType()) {
			return nil
		}
		q := flagged[string(rec.Topic())][rec.QueueID()]
		if q == nil {
			return nil
		}
		qo := rec.QueueOffset()
		if v.hasUnit(q, qo, phys, rec) {
			flush(q)
			return nil
		}
		q.missing++
		if q.firstMissing < 0 {
			q.firstMissing = phys
		}
		if qo < q.max {
			q.holes = true
		}
		if r := runs[q]; r != nil && qo == r.lastQO+1 {
			r.lastQO, r.n = qo, r.n+1
			return nil
		}
		flush(q)
		runs[q] = &run{phys: phys, firstQO: qo, lastQO: qo, n: 1}
		return nil
	})
	for _, q := range qs {
		if runs[q] != nil {
			flush(q)
		}
	}
	return err
}

// hasUnit says the unit at queue offset qo of q names the record at phys.
func (v *verifier) hasUnit(q *queueCheck, qo, phys int64, rec commitlog.View) bool {
	if q.cq == nil || q.fileBad || qo < q.min || qo >= q.max {
		return false
	}
	u, err := q.cq.Unit(qo)
	return err == nil && u == derive.Unit(phys, rec, derive.PropsOf(rec), nil)
}
