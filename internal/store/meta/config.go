package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"

	"github.com/rocketstore/engine/internal/vfs"
)

// BakSuffix is appended to a config file's name for the backup that Save keeps and Load falls
// back to, as RocketMQ's ConfigManager does.
const BakSuffix = ".bak"

// ErrCorrupt is wrapped by Load's error when a config file is empty or does not decode and its
// backup cannot stand in for it.
var ErrCorrupt = errors.New("meta: config file corrupt")

// Source says which file Load took the value from.
type Source struct {
	Path string // the main file, or its .bak
	// MainErr says why the main file was not used (missing, empty, not valid JSON); nil when
	// it was. Worth a warning: a save was interrupted or the file was damaged.
	MainErr error
}

// FromBackup reports whether the value came from the .bak file.
func (s Source) FromBackup() bool { return s.MainErr != nil }

// Save writes v as JSON to path the way RocketMQ's ConfigManager.persist does, keeping the
// previous version as path+".bak": the current content is copied to the .bak file, then the new
// content replaces path; both steps are WriteFileAtomic (tmp, fsync, rename, directory fsync).
//
// The previous version is copied rather than renamed to .bak so that path never disappears:
// with a rename, a crash between the two steps on a file system that does not keep renames in
// order would leave no main file and an older .bak. A previous version that is empty or not
// JSON is not copied, so that an already damaged file never replaces a good backup.
//
// Saves of the same path must not overlap (RocketMQ's string2File is synchronized for the same
// reason); one saver per file is enough.
func Save(fsys vfs.FS, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return fmt.Errorf("meta: save %s: %w", path, err)
	}
	prev, err := fsys.ReadFile(path)
	switch {
	case err == nil:
		if json.Valid(quoteIntKeys(prev)) {
			if err := WriteFileAtomic(fsys, path+BakSuffix, prev); err != nil {
				return fmt.Errorf("meta: save %s: backup: %w", path, err)
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("meta: save %s: %w", path, err)
	}
	if err := WriteFileAtomic(fsys, path, data); err != nil {
		return fmt.Errorf("meta: save %s: %w", path, err)
	}
	return nil
}

// Load decodes the JSON at path into v, which must be a non-nil pointer, and says which file it
// used. Like RocketMQ's ConfigManager.load it falls back to path+".bak" when the main file is
// missing, empty or does not decode. It also accepts what RocketMQ's fastjson writes for maps
// with integer keys ({0:250}), which is not valid JSON.
//
// v is reset to its zero value before each attempt, so it ends up holding exactly one file's
// content, never a merge of a half-decoded main file and the backup.
//
// When neither file exists the error satisfies errors.Is(err, fs.ErrNotExist): a fresh store.
// When at least one exists but neither decodes it wraps ErrCorrupt. Any other read error of the
// main file is returned as is, without trying the backup: the main file may be fine, and
// silently going back one version would lose updates.
func Load(fsys vfs.FS, path string, v any) (Source, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Source{}, fmt.Errorf("meta: load %s: target is %T, not a non-nil pointer", path, v)
	}
	mainErr := decodeFile(fsys, path, rv)
	if mainErr == nil {
		return Source{Path: path}, nil
	}
	if !errors.Is(mainErr, fs.ErrNotExist) && !errors.Is(mainErr, ErrCorrupt) {
		return Source{}, fmt.Errorf("meta: load %s: %w", path, mainErr)
	}
	bak := path + BakSuffix
	bakErr := decodeFile(fsys, bak, rv)
	switch {
	case bakErr == nil:
		return Source{Path: bak, MainErr: mainErr}, nil
	case errors.Is(mainErr, fs.ErrNotExist) && errors.Is(bakErr, fs.ErrNotExist):
		return Source{}, fmt.Errorf("meta: load %s: %w (no backup either)", path, mainErr)
	case errors.Is(bakErr, fs.ErrNotExist) || errors.Is(bakErr, ErrCorrupt):
		return Source{}, fmt.Errorf("meta: load %s: %w: main file: %v; backup: %v", path, ErrCorrupt, mainErr, bakErr)
	default:
		return Source{}, fmt.Errorf("meta: load %s: main file: %v; backup: %w", path, mainErr, bakErr)
	}
}

// decodeFile reads name and decodes it into the pointer rv after zeroing what it points to.
// Read errors come back as they are; content that cannot stand as the value wraps ErrCorrupt.
func decodeFile(fsys vfs.FS, name string, rv reflect.Value) error {
	b, err := fsys.ReadFile(name)
	if err != nil {
		return err
	}
	rv.Elem().SetZero()
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("%w: %s is empty", ErrCorrupt, name)
	}
	if err := json.Unmarshal(quoteIntKeys(b), rv.Interface()); err != nil {
		rv.Elem().SetZero()
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	return nil
}
