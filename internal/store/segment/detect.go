package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/rocketstore/engine/internal/vfs"
)

// ErrMixedSizes is DetectFileSize's error for a directory whose segment files do not tell one
// size: files of different sizes, or a base offset that is not a multiple of the size.
var ErrMixedSizes = errors.New("segment: the files do not agree on one segment size")

// DetectFileSize is the size of the segment files in dir, as the files themselves say: a
// writer creates every segment of a queue with one size (RocketMQ's mappedFileSize), at a
// base offset that is a multiple of it, so the file size is the size the queue was written
// with and no configuration needs to repeat it. A last file of zero length is a file being
// created and is left out. ok is false when dir holds no segment of non-zero length (it is
// missing, empty, or its only file is being created). Files that disagree are ErrMixedSizes.
func DetectFileSize(fsys vfs.FS, dir string) (size int64, ok bool, err error) {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("segment: %w", err)
	}
	type seg struct {
		name       string
		base, size int64
	}
	var segs []seg
	for _, e := range ents {
		base, isSeg := ParseName(e.Name)
		if e.IsDir || !isSeg {
			continue
		}
		st, err := fsys.Stat(path.Join(dir, e.Name))
		if err != nil {
			return 0, false, fmt.Errorf("segment: %w", err)
		}
		segs = append(segs, seg{path.Join(dir, e.Name), base, st.Size})
	}
	if n := len(segs); n > 0 && segs[n-1].size == 0 {
		segs = segs[:n-1] // being created: sized right after
	}
	if len(segs) == 0 {
		return 0, false, nil
	}
	size = segs[0].size
	for _, s := range segs {
		switch {
		case s.size != size:
			return 0, false, fmt.Errorf("%w: %s is %d bytes, %s is %d", ErrMixedSizes, segs[0].name, size, s.name, s.size)
		case size <= 0 || s.base%size != 0:
			return 0, false, fmt.Errorf("%w: %s starts at offset %d, which is not a multiple of its size %d",
				ErrMixedSizes, s.name, s.base, size)
		}
	}
	return size, true, nil
}
