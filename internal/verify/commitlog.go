package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/segment"
)

// scanChunk is how many bytes of a segment are scanned between two progress reports and
// cancellation checks.
const scanChunk = 16 << 20

// errChunk stops a Scan at a chunk boundary; the scan resumes there.
var errChunk = errors.New("verify: chunk done")

// qsum sums up the records of one queue in one segment (or, merged, in the whole log).
type qsum struct {
	count               int64
	firstQO, lastQO     int64
	firstPhys, lastPhys int64
	// The first place the queue offsets do not follow one another.
	gaps                     int64
	gapPhys, gapGot, gapWant int64
}

// add counts the record at phys with queue offset qo.
func (s *qsum) add(phys, qo int64) {
	if s.count == 0 {
		s.firstQO, s.firstPhys = qo, phys
	} else if qo != s.lastQO+1 {
		if s.gaps == 0 {
			s.gapPhys, s.gapGot, s.gapWant = phys, qo, s.lastQO+1
		}
		s.gaps++
	}
	s.lastQO, s.lastPhys = qo, phys
	s.count++
}

// merge appends the sums of a later segment to s.
func (s *qsum) merge(t *qsum) {
	if t.count == 0 {
		return
	}
	if s.count == 0 {
		*s = *t
		return
	}
	if t.firstQO != s.lastQO+1 {
		if s.gaps == 0 {
			s.gapPhys, s.gapGot, s.gapWant = t.firstPhys, t.firstQO, s.lastQO+1
		}
		s.gaps++
	}
	if s.gaps == 0 && t.gaps > 0 {
		s.gapPhys, s.gapGot, s.gapWant = t.gapPhys, t.gapGot, t.gapWant
	}
	s.gaps += t.gaps
	s.lastQO, s.lastPhys = t.lastQO, t.lastPhys
	s.count += t.count
}

// queueSums holds qsums by topic and queue id. Lookups by the topic bytes of a record do not
// allocate.
type queueSums map[string]map[int32]*qsum

func (m queueSums) get(topic []byte, id int32) *qsum {
	byID := m[string(topic)]
	if s := byID[id]; s != nil {
		return s
	}
	if byID == nil {
		byID = make(map[int32]*qsum)
		m[string(topic)] = byID
	}
	s := &qsum{}
	byID[id] = s
	return s
}

// probe says what lies at one offset of a segment (the checkpoint's dispatched offset).
type probe uint8

const (
	probeNone     probe = iota // not in this segment, or past its valid data
	probeRecord                // a record starts there
	probeInside                // inside a record
	probeChainEnd              // where the valid data of the segment ends
	probeFiller                // inside the blank filler
)

// segScan is what the scan of one segment found. Each segment is scanned on its own from its
// position 0 (records never cross segments), so segments are scanned in parallel and the
// chain is put together afterwards.
type segScan struct {
	name string
	base int64
	// end is where the valid records from position 0 stop; tail says why, corrupt the reason
	// when the tail is TailCorrupt.
	end     int64
	tail    commitlog.Tail
	corrupt error
	records int64
	bytes   int64
	lastTS  int64
	maxTS   int64
	queues  queueSums
	// at is what lies at the probed offset, atRecord the record holding it when inside one.
	at       probe
	atRecord int64
	// For a corrupt tail: where the non-zero data ends, and what parses in [end, dataEnd).
	dataEnd         int64
	salvaged        int64
	salvageUnparsed int64
	// For a corrupt tail: how many records from end on RocketMQ's own recovery keeps (it checks
	// structure and BODYCRC only), and where they end.
	rmqRecords int64
	rmqEnd     int64
	// noPropEnd is the end of the last valid record without the __CRC32# property (0: none).
	noPropEnd int64
	err       error // an I/O or mapping error: the segment could not be read
}

// scanLog scans every segment of the log in parallel.
func (v *verifier) scanLog(ctx context.Context, files []*segment.File, probeAt int64) []*segScan {
	size := v.opts.CommitLogFileSize
	m := newMeter(v.opts.Progress, PhaseCommitLog, int64(len(files))*size)
	defer m.finish()
	out := make([]*segScan, len(files))
	parallel(ctx, v.opts.Workers, len(files), func(i int) { out[i] = v.scanSegment(ctx, files[i], probeAt, m) })
	return out
}

// scanSegment checks every record of f from position 0 until the data ends.
func (v *verifier) scanSegment(ctx context.Context, f *segment.File, probeAt int64, m *meter) *segScan {
	s := &segScan{name: f.Name(), base: f.Base(), queues: make(queueSums), at: probeNone}
	if !f.Acquire() {
		s.err = fmt.Errorf("%w: %s", segment.ErrDeleted, f.Name())
		return s
	}
	defer f.Release()
	data := f.Data()
	size := int64(len(data))
	pr := int64(-1)
	if probeAt >= s.base && probeAt < s.base+size {
		pr = probeAt - s.base
	}
	chk := v.opts.check()
	var last *qsum
	var lastTopic []byte
	var lastID int32
	pos, reported := 0, int64(0)
	for {
		chunkEnd := pos + scanChunk
		end, tail, err := commitlog.Scan(data, pos, chk, func(off int, rec commitlog.View) error {
			if off >= chunkEnd {
				return errChunk
			}
			phys := s.base + int64(off)
			if err := commitlog.CheckPlaced(off, phys, rec, v.rule); err != nil {
				return err
			}
			n := int64(rec.TotalSize())
			if !rec.HasPropCRC() {
				s.noPropEnd = phys + n
			}
			if pr >= int64(off) && pr < int64(off)+n {
				s.at, s.atRecord = probeInside, phys
				if pr == int64(off) {
					s.at = probeRecord
				}
			}
			s.records++
			s.bytes += n
			ts := rec.StoreTimestamp()
			s.lastTS, s.maxTS = ts, max(s.maxTS, ts)
			if derive.Queued(rec.TransactionType()) {
				topic, id := rec.Topic(), rec.QueueID()
				if last == nil || id != lastID || string(topic) != string(lastTopic) {
					last, lastTopic, lastID = s.queues.get(topic, id), topic, id
				}
				last.add(phys, rec.QueueOffset())
			}
			return nil
		})
		if tail == commitlog.TailStopped && err == errChunk {
			m.report(int64(end) - reported)
			reported = int64(end)
			pos = end
			if ctx.Err() != nil {
				s.err = ctx.Err()
				return s
			}
			continue
		}
		if tail == commitlog.TailStopped {
			ce, ok := errors.AsType[*commitlog.CorruptError](err)
			if !ok {
				s.err = err
				return s
			}
			ce.Off = end
			tail = commitlog.TailCorrupt
		}
		s.end, s.tail, s.corrupt = int64(end), tail, err
		break
	}
	m.report(size - reported)
	if s.at == probeNone && pr >= 0 {
		switch {
		case pr == s.end:
			s.at = probeChainEnd
		case pr > s.end && s.tail == commitlog.TailBlank:
			s.at = probeFiller
		}
	}
	if s.tail == commitlog.TailCorrupt {
		s.salvage(data)
		s.rocketMQKeeps(data)
	}
	return s
}

// salvage measures what follows a corrupt end in the segment: how far non-zero data goes, and
// how many records parse there, hopping over each by its TOTALSIZE (CRCs are not required: a
// record failing its CRC is still a record lost). It is what cutting the segment removes.
func (s *segScan) salvage(data []byte) {
	s.dataEnd = s.end + lastNonZero(data[s.end:])
	pos := s.end
	for pos < s.dataEnd {
		if len(data)-int(pos) >= 8 && binary.BigEndian.Uint32(data[pos+commitlog.PosMagic:]) == commitlog.MagicBlank {
			pos = s.dataEnd // the filler closing the segment is no data
			break
		}
		rec, err := commitlog.Parse(data[pos:])
		if err != nil {
			break
		}
		s.salvaged++
		pos += int64(rec.TotalSize())
	}
	s.salvageUnparsed = max(s.dataEnd-pos, 0)
}

// rocketMQKeeps measures what RocketMQ's recovery keeps from the corrupt end on: it checks the
// structure and BODYCRC of each record, and neither its __CRC32# entry nor its PHYSICALOFFSET.
// Repair never removes such records unless told to.
func (s *segScan) rocketMQKeeps(data []byte) {
	end, _, _ := commitlog.Scan(data, int(s.end), commitlog.Check{NoPropCRC: true}, func(int, commitlog.View) error {
		s.rmqRecords++
		return nil
	})
	s.rmqEnd = int64(end)
}

// lastNonZero is the length of b without its trailing zero bytes.
func lastNonZero(b []byte) int64 {
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return int64(i)
}

// hasData says the segment holds something: records, a filler, or bytes that are not zero.
func (s *segScan) hasData() bool {
	return s.records > 0 || s.tail != commitlog.TailClean || s.end > 0
}

// chain is the log put together from the segment scans: the valid records run from the first
// segment on, through blank fillers, until one segment's data ends; that is the log's end.
type chain struct {
	start, end int64
	stop       *segScan   // the segment where the data ends; nil without segments
	full       bool       // the data ends at the end of the last segment
	after      []*segScan // later segments that hold data
	queues     queueSums  // merged over the chain, in log order
	noPropEnd  int64      // the end of the last valid record without the __CRC32# property (0: none)
	records    int64
	bytes      int64
	lastTS     int64
	maxTS      int64
}

// assemble puts the chain together.
func (v *verifier) assemble(scans []*segScan) *chain {
	c := &chain{queues: make(queueSums)}
	if len(scans) == 0 {
		return c
	}
	size := v.opts.CommitLogFileSize
	c.start = scans[0].base
	i := 0
	for ; i < len(scans); i++ {
		s := scans[i]
		c.records += s.records
		c.bytes += s.bytes
		if s.records > 0 {
			c.lastTS = s.lastTS
		}
		c.maxTS = max(c.maxTS, s.maxTS)
		c.noPropEnd = max(c.noPropEnd, s.noPropEnd)
		for topic, byID := range s.queues {
			for id, q := range byID {
				c.queues.get([]byte(topic), id).merge(q)
			}
		}
		if s.tail != commitlog.TailBlank {
			c.end, c.stop = s.base+s.end, s
			break
		}
		c.end = s.base + size
	}
	if i == len(scans) {
		c.stop, c.full = scans[len(scans)-1], true
		return c
	}
	for _, s := range scans[i+1:] {
		if s.hasData() {
			c.after = append(c.after, s)
		}
	}
	return c
}

// checkChain reports how the log ends and fills in the CommitLog report.
func (v *verifier) checkChain(c *chain, durable int64) {
	r := &v.rep.CommitLog
	r.Start, r.End, r.Records, r.Bytes = c.start, c.end, c.records, c.bytes
	r.LastStoreTimestamp, r.MaxStoreTimestamp = c.lastTS, c.maxTS
	switch {
	case c.stop == nil:
		r.Tail = "clean"
		return
	case c.full:
		r.Tail = "full"
		return
	case c.stop.tail == commitlog.TailClean && len(c.after) == 0:
		r.Tail = "clean"
		return
	}
	s := c.stop
	d := &Drop{Segment: v.rel(s.name), From: c.end, To: c.end}
	if s.tail == commitlog.TailCorrupt {
		d.To = s.base + s.dataEnd
		d.Records, d.Unparsed = s.salvaged, s.salvageUnparsed
	}
	for _, a := range c.after {
		d.LaterSegments = append(d.LaterSegments, v.rel(a.name))
		d.LaterRecords += a.records
		d.LaterBytes += a.bytes
	}
	d.Sealed = c.end < durable || d.LaterRecords > 0
	r.Drop = d

	var why string
	switch {
	case s.tail == commitlog.TailCorrupt:
		why = reasonText(s.corrupt)
		if ce, ok := errors.AsType[*commitlog.CorruptError](s.corrupt); ok {
			switch ce.Reason {
			case commitlog.ReasonPropCRCMissing:
				why += fmt.Sprintf(" (the checkpoint says the engine wrote every record %s with it: damage to its own name, or a record torn before it)", ruleRange(v.rule))
			case commitlog.ReasonPropsMalformed:
				why += fmt.Sprintf(" (the checkpoint says only the engine wrote past its durable offset %d, and the engine writes no such properties)", v.rule.OwnFrom)
			}
		}
		if s.rmqRecords > 0 {
			why += fmt.Sprintf("; RocketMQ's own recovery, which checks only the structure and the body CRC, keeps this record and %d more in [%d, %d)",
				s.rmqRecords-1, c.end, s.base+s.rmqEnd)
		}
	default:
		why = "the data ends here, but later segments hold data"
	}
	r.TailReason = why
	var sealedBy string
	switch {
	case c.end < durable:
		sealedBy = fmt.Sprintf("below the checkpoint's durable offset %d", durable)
	case d.LaterRecords > 0:
		sealedBy = fmt.Sprintf("followed by %d valid records (%d bytes) in %d later segments", d.LaterRecords, d.LaterBytes, len(c.after))
	}
	loss := fmt.Sprintf("cutting here drops [%d, %d) of %s (%d records parse there, %d bytes do not)",
		d.From, d.To, path.Base(s.name), d.Records, d.Unparsed)
	if len(d.LaterSegments) > 0 {
		loss += fmt.Sprintf(" and %d later segments (%d valid records, %d bytes)", len(d.LaterSegments), d.LaterRecords, d.LaterBytes)
	}
	if d.Sealed {
		r.Tail = "corrupt"
		v.problems.add(Problem{Kind: KindLogCorrupt, File: v.rel(s.name), Offset: c.end,
			Desc: fmt.Sprintf("corrupt data inside sealed data (%s): %s; %s", sealedBy, why, loss)})
		return
	}
	r.Tail = "torn"
	v.problems.add(Problem{Kind: KindLogTorn, File: v.rel(s.name), Offset: c.end,
		Desc: fmt.Sprintf("torn tail (above anything known durable: a write a crash cut short): %s; %s", why, loss)})
}

// checkQueueOffsets reports queues whose records' queue offsets do not follow one another.
func (v *verifier) checkQueueOffsets(c *chain) {
	for topic, byID := range c.queues {
		for id, q := range byID {
			if q.gaps == 0 {
				continue
			}
			v.problems.add(Problem{Kind: KindLogQueueOffset, File: v.rel(v.segmentName(q.gapPhys)), Offset: q.gapPhys,
				Desc: fmt.Sprintf("queue %s/%d: the record here has queue offset %d, the one before it %d (%d such breaks); a ConsumeQueue cannot be built from these records",
					topic, id, q.gapGot, q.gapWant-1, q.gaps)})
		}
	}
}

// segmentName is the path of the CommitLog segment holding phys.
func (v *verifier) segmentName(phys int64) string {
	size := v.opts.CommitLogFileSize
	return path.Join(v.logDir(), segment.Name(phys-phys%size))
}

func (v *verifier) logDir() string { return path.Join(v.opts.Dir, "commitlog") }

// ruleRange describes where a rule requires the __CRC32# property.
func ruleRange(r commitlog.PropCRCRule) string {
	if r.To == math.MaxInt64 {
		return fmt.Sprintf("from %d on", r.From)
	}
	return fmt.Sprintf("in [%d, %d)", r.From, r.To)
}

// reasonText describes a scan error without the package prefix and offset the CommitLog puts
// in front (the problem carries the offset).
func reasonText(err error) string {
	if ce, ok := errors.AsType[*commitlog.CorruptError](err); ok {
		c := *ce
		msg := c.Error()
		prefix := fmt.Sprintf("commitlog: corrupt record at %d: ", c.Off)
		if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
			return "corrupt record: " + msg[len(prefix):]
		}
		return msg
	}
	if err == nil {
		return "unknown"
	}
	return err.Error()
}
