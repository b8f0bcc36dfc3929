package reader

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/segment"
)

// An offline Reader reads the sizes of the store's files from the files (see OfflineOptions):
// a CommitLog segment's size is its file's size, a ConsumeQueue file holds its size / 20 units,
// and an IndexFile's geometry is the one its content fits (indexfile.DetectGeometry). A size
// the caller gives must agree with the files; it only decides where the files cannot tell.

// Errors about the sizes of an offline store.
var (
	// ErrSizeMismatch: a size given in OfflineOptions is not the one the store's files have.
	ErrSizeMismatch = errors.New("reader: the sizes given are not the store's")
	// ErrSizeUnknown: the files fit more than one IndexFile geometry; give IndexSlots and
	// IndexEntries.
	ErrSizeUnknown = errors.New("reader: the store's files do not tell its sizes")
)

// sizes are the sizes an offline Reader opens the store with. A size is pinned once the files
// have told it or the caller gave it; until then it is a default, which only a store without
// such files yet uses, and Refresh looks at the files again.
type sizes struct {
	logSize                        int64
	logPinned                      bool
	units                          int
	unitsPinned                    bool
	index                          indexfile.Geometry
	indexPinned                    bool
	givenLog, givenUnits           bool
	givenSlots, givenEntries       int32
	commitLogDir, indexDir, cqRoot string
}

// resolveLog sets the CommitLog segment size from the files, or checks the one given.
func (o *offline) resolveLog() error {
	sz := &o.sizes
	if sz.logPinned {
		return nil
	}
	size, found, err := segment.DetectFileSize(o.fs, sz.commitLogDir)
	if err != nil {
		return fmt.Errorf("reader: CommitLog: %w", err)
	}
	switch {
	case !found:
		if !sz.givenLog {
			sz.logSize = commitlog.DefaultFileSize
		}
	case sz.givenLog && size != sz.logSize:
		return fmt.Errorf("%w: the CommitLog segments of %s are %d bytes, not %d", ErrSizeMismatch, o.dir, size, sz.logSize)
	default:
		sz.logSize, sz.logPinned = size, true
	}
	return nil
}

// resolveUnits sets the ConsumeQueue units per file from the files, or checks the ones given.
// Called once, at open: a Store keeps the units it was opened with, so a Refresh that finds
// the first files of another size fails (open the Reader again).
func (o *offline) resolveUnits() error {
	sz := &o.sizes
	units, found, err := consumequeue.DetectUnitsPerFile(o.fs, sz.cqRoot)
	if err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	switch {
	case !found:
		if !sz.givenUnits {
			sz.units = consumequeue.DefaultUnitsPerFile
		}
	case sz.givenUnits && units != sz.units:
		return fmt.Errorf("%w: the ConsumeQueue files of %s hold %d units (%d bytes), not %d",
			ErrSizeMismatch, o.dir, units, units*consumequeue.UnitSize, sz.units)
	default:
		sz.units, sz.unitsPinned = units, true
	}
	return nil
}

// checkUnits is resolveUnits for a Refresh: the files that have appeared since the open must
// have the units the ConsumeQueues were opened with.
func (o *offline) checkUnits() error {
	sz := &o.sizes
	if sz.unitsPinned || sz.givenUnits {
		return nil
	}
	units, found, err := consumequeue.DetectUnitsPerFile(o.fs, sz.cqRoot)
	if err != nil || !found {
		return err
	}
	if units != sz.units {
		return fmt.Errorf("%w: the ConsumeQueue files written since the store was opened hold %d units, "+
			"not the %d assumed while it had none: open it again", ErrSizeMismatch, units, sz.units)
	}
	sz.unitsPinned = true
	return nil
}

// indexTries is how often resolveIndex looks at the files before it concludes: a put under
// way in the newest file can make the right geometry look wrong for an instant.
const indexTries = 3

// resolveIndex sets the IndexFile geometry from the files, or checks the one given.
func (o *offline) resolveIndex() (err error) {
	for range indexTries {
		if err = o.resolveIndexOnce(); err == nil {
			return nil
		}
	}
	return err
}

func (o *offline) resolveIndexOnce() error {
	sz := &o.sizes
	if sz.indexPinned {
		return nil
	}
	given := indexfile.Geometry{Slots: sz.givenSlots, Entries: sz.givenEntries}
	dg, err := indexfile.DetectGeometry(o.fs, sz.indexDir)
	if err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	if dg.Size == 0 { // no index file yet
		sz.index = indexfile.DefaultGeometry
		if sz.givenSlots > 0 && sz.givenEntries > 0 {
			sz.index = given
		}
		return nil
	}
	if dg.Fitting == nil { // no key yet: every geometry of the size reads the files alike
		if sz.givenSlots > 0 && sz.givenEntries > 0 {
			if given.FileSize() != dg.Size {
				return fmt.Errorf("%w: the IndexFiles of %s are %d bytes, not the %d of %d slots and %d entries",
					ErrSizeMismatch, o.dir, dg.Size, given.FileSize(), given.Slots, given.Entries)
			}
			sz.index = given
			return nil
		}
		sz.index, err = indexfile.GeometryOfSize(dg.Size)
		return err
	}
	var fit []indexfile.Geometry
	for _, g := range dg.Fitting {
		if (sz.givenSlots == 0 || g.Slots == sz.givenSlots) && (sz.givenEntries == 0 || g.Entries == sz.givenEntries) {
			fit = append(fit, g)
		}
	}
	switch {
	case len(fit) == 1:
		sz.index, sz.indexPinned = fit[0], true
		return nil
	case len(fit) == 0:
		return fmt.Errorf("%w: the IndexFiles of %s were written with %s, not %s", ErrSizeMismatch, o.dir,
			geometries(dg.Fitting), geometryGiven(sz.givenSlots, sz.givenEntries))
	}
	return fmt.Errorf("%w: the IndexFiles of %s fit %s", ErrSizeUnknown, o.dir, geometries(fit))
}

func geometries(gs []indexfile.Geometry) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += " or "
		}
		s += fmt.Sprintf("%d slots and %d entries", g.Slots, g.Entries)
	}
	return s
}

func geometryGiven(slots, entries int32) string {
	switch {
	case slots > 0 && entries > 0:
		return fmt.Sprintf("%d slots and %d entries", slots, entries)
	case slots > 0:
		return fmt.Sprintf("%d slots", slots)
	}
	return fmt.Sprintf("%d entries", entries)
}

// newSizes are the sizes of the store in dir before the files are looked at: the ones given.
func newSizes(dir string, opts OfflineOptions) (sizes, error) {
	sz := sizes{
		logSize: opts.CommitLogFileSize, givenLog: opts.CommitLogFileSize != 0,
		units: opts.ConsumeQueueUnits, givenUnits: opts.ConsumeQueueUnits != 0,
		commitLogDir: filepath.Join(dir, "commitlog"), indexDir: filepath.Join(dir, "index"), cqRoot: dir,
	}
	switch {
	case opts.CommitLogFileSize < 0, opts.ConsumeQueueUnits < 0, opts.IndexSlots < 0, opts.IndexEntries < 0,
		opts.IndexSlots > 1<<31-1, opts.IndexEntries > 1<<31-1:
		return sz, fmt.Errorf("reader: sizes %+v: negative or too large", opts)
	}
	sz.givenSlots, sz.givenEntries = int32(opts.IndexSlots), int32(opts.IndexEntries)
	return sz, nil
}
