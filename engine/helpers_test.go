package engine

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// recordsOf lists the offsets and sizes of the records below end in a stopped store.
func recordsOf(t *testing.T, dir string, segSize, end int64) (offs []int64, sizes []int) {
	t.Helper()
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: vfs.Default, Dir: filepath.Join(dir, "commitlog"), FileSize: segSize, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := log.Each(0, end, commitlog.Check{}, func(phys int64, v commitlog.View) error {
		offs, sizes = append(offs, phys), append(sizes, v.TotalSize())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 {
		t.Fatal("no records")
	}
	return offs, sizes
}

// copyDir copies a stopped store.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// flipBit flips one bit of the CommitLog at offset off.
func flipBit(t *testing.T, logDir string, segSize, off int64, bit uint) {
	t.Helper()
	name := filepath.Join(logDir, segment.Name(off-off%segSize))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off%segSize); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, off%segSize); err != nil {
		t.Fatal(err)
	}
}

// setCheckpoint rewrites the checkpoint's offsets, as if it had been written at another moment.
func setCheckpoint(t testing.TB, dir string, dispatched, durable int64) {
	t.Helper()
	path := filepath.Join(dir, checkpoint.FileName)
	cp, err := checkpoint.Load(vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	cp.Ext.Valid, cp.Ext.DispatchedOffset, cp.Ext.DurableOffset = true, dispatched, durable
	if err := checkpoint.Save(vfs.Default, path, cp); err != nil {
		t.Fatal(err)
	}
}
