package verify

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// DefaultMaxProblems is how many problems of each kind a Report lists (all are counted).
const DefaultMaxProblems = 100

// Options describe the store to check. The sizes must be the ones the store was written with
// (the writer's engine.Options): a file of another size is a problem, and an IndexFile read with
// another geometry finds nothing. The zero value of each size means the engine's default.
type Options struct {
	// FS is the file system; vfs.Default when nil.
	FS vfs.FS
	// Dir is the store directory (the engine's Options.Dir).
	Dir string

	// CommitLogFileSize is the CommitLog segment size (1 GiB).
	CommitLogFileSize int64
	// ConsumeQueueUnits is the number of units per ConsumeQueue file (300,000).
	ConsumeQueueUnits int
	// IndexSlots and IndexEntries are the IndexFile geometry (5,000,000 and 20,000,000).
	IndexSlots, IndexEntries int
	// NoIndex says the store is written without an IndexFile (engine.Options.NoIndex): index
	// files are then neither checked nor expected, and Repair builds none.
	NoIndex bool
	// NoPropCRC requires the whole-record __CRC32# property nowhere. By default it is required
	// where the checkpoint says the engine wrote it on every record (commitlog.PropCRCRule: a
	// record whose entry is damaged in its own name would otherwise pass with only its body
	// checked); it is checked wherever it is present either way.
	NoPropCRC bool

	// DryRun makes Repair stop after working out its Plan: it verifies under the lock, tells
	// the plan, and changes nothing.
	DryRun bool
	// ForceCut lets Repair cut the CommitLog where RocketMQ's own recovery would keep the
	// records cut (Plan.RocketMQKeeps): records that fail only the engine's stricter checks, the
	// whole-record CRC or PHYSICALOFFSET. Without it Repair refuses before changing anything.
	ForceCut bool
	// OnPlan, when set, is told the verification Repair is based on and its plan, before
	// anything is changed.
	OnPlan func(*Report, *Plan)

	// Workers bounds the goroutines that scan segments, queues and index files in parallel
	// (GOMAXPROCS when 0).
	Workers int
	// MaxProblems is how many problems of each kind the Report lists (DefaultMaxProblems when
	// 0); every problem is counted in Report.Counts.
	MaxProblems int
	// Progress, when set, is told how far each phase is. Calls are serialised, and Done never
	// goes down within a phase.
	Progress func(Progress)
}

// Phase names a step of Verify, for Progress.
type Phase string

// The phases, in the order they run.
const (
	PhaseCommitLog    Phase = "commitlog"
	PhaseConsumeQueue Phase = "consumequeue"
	PhaseIndex        Phase = "index"
)

// Progress is how far a phase is: in bytes of segments for the CommitLog (the zero tail of
// the last segment included, which is checked too), in queues for the ConsumeQueues (how many
// units a queue holds is known only once it is read), in bytes of entries for the IndexFiles.
type Progress struct {
	Phase       Phase
	Done, Total int64
	// Bytes says Done and Total count bytes; otherwise they count queues.
	Bytes bool
}

// ErrNoStore is returned when Dir does not exist or is not a directory.
var ErrNoStore = errors.New("verify: no store")

// ErrOptions is returned for sizes no store can have.
var ErrOptions = errors.New("verify: bad options")

// withDefaults fills in the defaults and checks the sizes.
func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Dir == "" {
		return o, fmt.Errorf("%w: no store directory given", ErrNoStore)
	}
	if o.CommitLogFileSize == 0 {
		o.CommitLogFileSize = commitlog.DefaultFileSize
	}
	if o.CommitLogFileSize < 0 || o.CommitLogFileSize < commitlog.MinRecordLen+commitlog.BlankSize {
		return o, fmt.Errorf("%w: CommitLog segment size %d is too small", ErrOptions, o.CommitLogFileSize)
	}
	if o.ConsumeQueueUnits == 0 {
		o.ConsumeQueueUnits = consumequeue.DefaultUnitsPerFile
	}
	if o.ConsumeQueueUnits < 1 || o.ConsumeQueueUnits > (1<<31-1)/consumequeue.UnitSize {
		return o, fmt.Errorf("%w: %d ConsumeQueue units per file", ErrOptions, o.ConsumeQueueUnits)
	}
	if o.IndexSlots == 0 {
		o.IndexSlots = int(indexfile.DefaultGeometry.Slots)
	}
	if o.IndexEntries == 0 {
		o.IndexEntries = int(indexfile.DefaultGeometry.Entries)
	}
	if o.IndexSlots < 0 || o.IndexEntries < 0 || o.IndexSlots > 1<<31-1 || o.IndexEntries > 1<<31-1 {
		return o, fmt.Errorf("%w: index geometry %d slots / %d entries", ErrOptions, o.IndexSlots, o.IndexEntries)
	}
	if err := o.geometry().Validate(); err != nil {
		return o, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxProblems <= 0 {
		o.MaxProblems = DefaultMaxProblems
	}
	return o, nil
}

func (o Options) geometry() indexfile.Geometry {
	return indexfile.Geometry{Slots: int32(o.IndexSlots), Entries: int32(o.IndexEntries)}
}

// check is what every record is checked for in its own bytes, as recovery checks it: its
// structure, its body CRC and its whole-record CRC where present. Where the entry is required
// is the verifier's rule (commitlog.CheckPlaced).
func (o Options) check() commitlog.Check {
	return commitlog.Check{}
}
