package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// roFS is the file system Verify reads through: it maps files read-only and refuses every
// change, so that no code path of the store packages can touch the store, and it hides files
// Verify decided to leave out (a zero-length last segment, which the engine deletes on open).
type roFS struct {
	vfs.ReadOnlyFS
	hide map[string]bool
}

var errReadOnly = errors.New("verify: read-only")

// ReadDir lists dir without the hidden files.
func (f roFS) ReadDir(dir string) ([]vfs.DirEntry, error) {
	ents, err := f.FS.ReadDir(dir)
	if err != nil || len(f.hide) == 0 {
		return ents, err
	}
	kept := ents[:0:0]
	for _, e := range ents {
		if !f.hide[path.Join(dir, e.Name)] {
			kept = append(kept, e)
		}
	}
	return kept, nil
}

// segFile is one file of a segment queue as listed.
type segFile struct {
	name string // path
	base int64
}

// layout is what listing a segment directory found.
type layout struct {
	files []segFile
	// bad describes files the store packages would refuse (wrong size, a gap, an unaligned
	// name), one string each, with the file it is about.
	bad []layoutProblem
	// empty is a zero-length last file: a creation cut short, which the writer deletes.
	empty string
}

type layoutProblem struct {
	file, desc string
}

// listSegments lists the segment files of dir (20-digit names) and checks them as
// segment.Open would: every file exactly size bytes, named by a multiple of size, each
// starting where the previous ends. A zero-length last file is set apart, not a problem. A
// missing directory is an empty layout.
func listSegments(fsys vfs.FS, dir string, size int64) (layout, error) {
	var l layout
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	var names []vfs.DirEntry
	for _, e := range ents {
		if _, ok := segment.ParseName(e.Name); ok && !e.IsDir {
			names = append(names, e)
		}
	}
	for i, e := range names {
		name := path.Join(dir, e.Name)
		base, _ := segment.ParseName(e.Name)
		st, err := fsys.Stat(name)
		if err != nil {
			return l, err
		}
		switch {
		case st.Size == 0 && i == len(names)-1:
			l.empty = name
			continue
		case st.Size != size:
			l.bad = append(l.bad, layoutProblem{name, fmt.Sprintf("%d bytes, want %d (the size the store is written with?)", st.Size, size)})
			continue
		case base%size != 0:
			l.bad = append(l.bad, layoutProblem{name, fmt.Sprintf("named by offset %d, which is not a multiple of the file size %d", base, size)})
			continue
		}
		if n := len(l.files); n > 0 && l.files[n-1].base+size != base {
			prev := l.files[n-1]
			l.bad = append(l.bad, layoutProblem{name, fmt.Sprintf("does not follow %s: the files for [%d, %d) are missing",
				path.Base(prev.name), prev.base+size, base)})
		}
		l.files = append(l.files, segFile{name: name, base: base})
	}
	return l, nil
}

// rel is name relative to the store directory, for problems and notes.
func (v *verifier) rel(name string) string {
	if r, ok := cutPrefix(name, v.opts.Dir); ok {
		return r
	}
	return name
}

func cutPrefix(name, dir string) (string, bool) {
	d := path.Clean(dir)
	n := path.Clean(name)
	if d == "." || len(n) <= len(d) || n[:len(d)] != d || n[len(d)] != '/' {
		return "", false
	}
	return n[len(d)+1:], true
}
