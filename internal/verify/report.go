package verify

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Kind classifies a Problem.
type Kind string

// The kinds of problem Verify reports.
const (
	// KindLogFile: a CommitLog segment file has the wrong size, or segments are missing between
	// others; nothing else can be checked until it is fixed by hand.
	KindLogFile Kind = "commitlog-file"
	// KindLogCorrupt: a record that is not valid inside sealed data: below the checkpoint's
	// durable offset, or followed by valid records in later segments. Not a crash's doing;
	// repairing it loses everything after it.
	KindLogCorrupt Kind = "commitlog-corrupt"
	// KindLogTorn: the log ends in a torn record or non-zero bytes where zeros belong: a write a
	// crash cut short, above what was known durable. Recovery (or repair) cuts it.
	KindLogTorn Kind = "commitlog-torn-tail"
	// KindLogQueueOffset: valid records of one queue whose queue offsets are not consecutive.
	// Nothing can rebuild a ConsumeQueue from them.
	KindLogQueueOffset Kind = "commitlog-queue-offset"

	// KindCQFile: a ConsumeQueue file has the wrong size, or files are missing, or it cannot be read.
	KindCQFile Kind = "cq-file"
	// KindCQUnit: a unit that does not name its record: no record there, or one of another
	// queue or queue offset, another size, another tags code, or a type that has no unit.
	KindCQUnit Kind = "cq-unit"
	// KindCQOrder: units not sorted by physical offset.
	KindCQOrder Kind = "cq-order"
	// KindCQPastEnd: a unit that points past the end of the valid CommitLog.
	KindCQPastEnd Kind = "cq-past-end"
	// KindCQMissing: a record that should have a unit and has none.
	KindCQMissing Kind = "cq-missing-unit"

	// KindIndexFile: an IndexFile of the wrong size, or one that cannot be read.
	KindIndexFile Kind = "index-file"
	// KindIndexHeader: header fields that disagree with the entries.
	KindIndexHeader Kind = "index-header"
	// KindIndexEntry: an entry that does not name a record with a key of its hash.
	KindIndexEntry Kind = "index-entry"
	// KindIndexPastEnd: an entry that points past the end of the valid CommitLog.
	KindIndexPastEnd Kind = "index-past-end"
	// KindIndexChain: a hash chain that is not well formed: a prevIndex not below its entry, a
	// slot or link leading to an entry of another slot, a slot past the entries.
	KindIndexChain Kind = "index-chain"
	// KindIndexMissing: records with keys after the last indexed record.
	KindIndexMissing Kind = "index-missing"

	// KindCheckpoint: the checkpoint cannot be decoded, or its offsets or timestamps lie past
	// the data.
	KindCheckpoint Kind = "checkpoint"

	// KindConfig: a file of config/ the engine needs to start (subjectTags.json,
	// consumerOffset.json) that neither decodes nor has a backup that does; the problem says
	// what to do with it. Repair leaves it to be fixed by hand.
	KindConfig Kind = "config"
)

// Problem is one thing found wrong.
type Problem struct {
	Kind Kind `json:"kind"`
	// File is the file the problem is in, relative to the store directory.
	File string `json:"file"`
	// Offset locates it in the log the file belongs to: the CommitLog physical offset for
	// CommitLog problems (the start of the bad record), the queue's byte offset (queue offset x
	// 20; the file is named by its first) for ConsumeQueue units, the byte position in the file
	// for IndexFile and checkpoint problems.
	Offset int64  `json:"offset"`
	Desc   string `json:"desc"`
}

// Verdicts.
const (
	// VerdictConsistent: no problem found.
	VerdictConsistent = "consistent"
	// VerdictInconsistent: problems that recovery or repair fix without losing acknowledged
	// data: a torn tail, derived files out of line with the CommitLog, the checkpoint.
	VerdictInconsistent = "inconsistent"
	// VerdictCorrupt: damage to sealed CommitLog data (repair cuts there and loses what
	// follows) or to files repair cannot fix.
	VerdictCorrupt = "corrupt"
)

// Report is what Verify found.
type Report struct {
	Store    string        `json:"store"`
	Started  time.Time     `json:"started"`
	Took     time.Duration `json:"took_ns"`
	Verdict  string        `json:"verdict"`
	Problems []Problem     `json:"problems"`
	// Counts counts every problem found by kind, also those past MaxProblems that are not listed.
	Counts map[Kind]int64 `json:"counts"`
	// Omitted is how many problems are counted but not listed.
	Omitted int64 `json:"omitted"`
	// Notes are observations that are not problems (an engine holding the store, an unclean
	// last exit, parts not checked).
	Notes []string `json:"notes,omitempty"`

	CommitLog    LogReport        `json:"commitlog"`
	ConsumeQueue QueueReport      `json:"consumequeue"`
	Index        IndexReport      `json:"index"`
	Checkpoint   CheckpointReport `json:"checkpoint"`

	// AbortPresent says the abort marker is there: an engine runs (Verify takes no lock and
	// does not look; the newest data may then have been in flight, and problems at the tail
	// may be transient), or the last one did not stop cleanly.
	AbortPresent bool `json:"abort_present"`
}

// Consistent says no problem was found.
func (r *Report) Consistent() bool { return len(r.Problems) == 0 && r.Omitted == 0 }

// LogReport describes the CommitLog.
type LogReport struct {
	Segments    int   `json:"segments"`
	SegmentSize int64 `json:"segment_size"`
	// Start is the first offset stored; End where the valid data ends (the log's end once
	// recovered).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Records and Bytes count the valid records in [Start, End), every one checked.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Scanned is how many bytes of segments were read.
	Scanned int64 `json:"scanned"`
	// Tail is how the data ends: "clean" (zeros follow), "full" (at the end of the last
	// segment), "torn" or "corrupt"; TailReason says why for the last two.
	Tail       string `json:"tail"`
	TailReason string `json:"tail_reason,omitempty"`
	// PropCRC says how the whole-record CRC was checked: "required in range" (in [PropCRCFrom,
	// PropCRCTo), where the checkpoint says the engine wrote it on every record, and where present
	// elsewhere) or "where present". PropCRCTo is 9223372036854775807 (no end) while the
	// checkpoint says the engine wrote last: past its durable offset only the engine wrote too.
	PropCRC     string `json:"prop_crc"`
	PropCRCFrom int64  `json:"prop_crc_from"`
	PropCRCTo   int64  `json:"prop_crc_to"`
	// LastStoreTimestamp is the store timestamp of the last valid record, MaxStoreTimestamp the
	// newest of all (ms; 0 without records).
	LastStoreTimestamp int64 `json:"last_store_timestamp"`
	MaxStoreTimestamp  int64 `json:"max_store_timestamp"`
	// Drop is what recovery or repair cuts from the log, when it ends torn or corrupt.
	Drop *Drop `json:"drop,omitempty"`
}

// Drop is what cutting the log at its valid end removes.
type Drop struct {
	// Segment holds the cut; [From, To) is the byte range cut in it: from the first invalid
	// record to the last non-zero byte.
	Segment string `json:"segment"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	// Records is how many records parse in [From, To) (the invalid one included when its
	// lengths hold, each hopped over by its TOTALSIZE); Unparsed the bytes after them that do
	// not parse as records.
	Records  int64 `json:"records"`
	Unparsed int64 `json:"unparsed"`
	// LaterSegments are the later segments that hold data, all of which go: LaterRecords valid
	// records of LaterBytes bytes (counted from the start of each segment).
	LaterSegments []string `json:"later_segments,omitempty"`
	LaterRecords  int64    `json:"later_records"`
	LaterBytes    int64    `json:"later_bytes"`
	// Sealed says the cut loses data that was sealed (below the durable offset, or followed by
	// later valid segments), not only a write a crash cut short.
	Sealed bool `json:"sealed"`
}

// QueueReport describes the ConsumeQueues.
type QueueReport struct {
	Queues int `json:"queues"`
	// Units is how many units were checked against their records; Records how many records of
	// the CommitLog should have one (normal and committed messages).
	Units   int64 `json:"units"`
	Records int64 `json:"records"`
}

// IndexReport describes the IndexFiles.
type IndexReport struct {
	Files int `json:"files"`
	// Entries is how many entries were checked; Expired how many point below the CommitLog's
	// start (retention removed their records; not a problem).
	Entries int64 `json:"entries"`
	Expired int64 `json:"expired"`
	// Checked is false when the index was not checked (NoIndex, or the CommitLog unreadable).
	Checked bool `json:"checked"`
}

// CheckpointReport is the checkpoint as decoded.
type CheckpointReport struct {
	Present            bool  `json:"present"`
	PhysicMsgTimestamp int64 `json:"physic_msg_timestamp"`
	LogicsMsgTimestamp int64 `json:"logics_msg_timestamp"`
	IndexMsgTimestamp  int64 `json:"index_msg_timestamp"`
	// Extension says our offsets are there (a RocketMQ broker's checkpoint has none).
	Extension        bool  `json:"extension"`
	DurableOffset    int64 `json:"durable_offset"`
	DispatchedOffset int64 `json:"dispatched_offset"`
	// PropCRCFrom is the extension's offset from which the engine wrote the __CRC32# property on
	// every record (-1: not every record).
	PropCRCFrom int64 `json:"prop_crc_from"`
}

// collector gathers problems from several goroutines, listing at most max of each kind.
type collector struct {
	mu     sync.Mutex
	max    int
	list   []Problem
	counts map[Kind]int64
}

func newCollector(max int) *collector {
	return &collector{max: max, counts: make(map[Kind]int64)}
}

func (c *collector) add(p Problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[p.Kind]++
	if c.counts[p.Kind] <= int64(c.max) {
		c.list = append(c.list, p)
	}
}

// finish puts the problems, sorted by file and offset, into r.
func (c *collector) finish(r *Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := slices.Clone(c.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Kind, b.Kind))
	})
	r.Problems = list
	if r.Problems == nil {
		r.Problems = []Problem{}
	}
	r.Counts = make(map[Kind]int64, len(c.counts))
	var total int64
	for k, n := range c.counts {
		r.Counts[k] = n
		total += n
	}
	r.Omitted = total - int64(len(list))
}

// meter reports the progress of one phase, serialising the calls.
type meter struct {
	fn    func(Progress)
	phase Phase
	mu    sync.Mutex
	done  int64
	total int64
}

func newMeter(fn func(Progress), phase Phase, total int64) *meter {
	m := &meter{fn: fn, phase: phase, total: total}
	m.report(0)
	return m
}

// report adds n bytes done and tells the callback.
func (m *meter) report(n int64) {
	if m.fn == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = min(m.done+n, m.total)
	m.fn(Progress{Phase: m.phase, Done: m.done, Total: m.total, Bytes: m.phase != PhaseConsumeQueue})
}

// finish reports the phase complete.
func (m *meter) finish() { m.report(m.total) }
