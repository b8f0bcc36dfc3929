package consumequeue

import (
	"golang.org/x/sys/unix"

	"github.com/rocketstore/engine/internal/vfs"
)

// randomFS is vfs.OS with read-ahead turned off on every mapping (MADV_RANDOM); see testFS.
type randomFS struct{ vfs.OS }

func (r randomFS) CreateSegment(name string, size, reserve int64) (vfs.Segment, error) {
	s, err := r.OS.CreateSegment(name, size, reserve)
	if err == nil {
		unix.Madvise(s.Data(), unix.MADV_RANDOM)
	}
	return s, err
}

func (r randomFS) OpenSegment(name string, size int64, mode vfs.Mode) (vfs.Segment, error) {
	s, err := r.OS.OpenSegment(name, size, mode)
	if err == nil {
		unix.Madvise(s.Data(), unix.MADV_RANDOM)
	}
	return s, err
}
