package meta

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

const offsetsPath = "store/config/" + ConsumerOffsetFileName

func offsetsFile(offsets ...int64) ConsumerOffsetFile {
	q := make(map[int32]int64)
	for i, off := range offsets {
		q[int32(i)] = off
	}
	return ConsumerOffsetFile{OffsetTable: map[string]map[int32]int64{OffsetKey("g", "TopicTest"): q}}
}

func TestConfigSaveLoad(t *testing.T) {
	for name, tc := range map[string]struct {
		fsys vfs.FS
		path string
	}{
		"mem": {newMem(t, "store/config"), offsetsPath},
		"os":  {vfs.Default, filepath.Join(t.TempDir(), ConsumerOffsetFileName)},
	} {
		t.Run(name, func(t *testing.T) {
			fsys, path := tc.fsys, tc.path
			var got ConsumerOffsetFile
			if _, err := Load(fsys, path, &got); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("fresh: %v, want fs.ErrNotExist", err)
			}
			v1, v2 := offsetsFile(250, 251), offsetsFile(300, 301, 302)
			if err := Save(fsys, path, v1); err != nil {
				t.Fatal(err)
			}
			if _, ok := readOrNone(fsys, path+BakSuffix); ok {
				t.Fatal("first save wrote a backup of nothing")
			}
			if err := Save(fsys, path, v2); err != nil {
				t.Fatal(err)
			}
			src, err := Load(fsys, path, &got)
			if err != nil || src.Path != path || src.FromBackup() || !reflect.DeepEqual(got, v2) {
				t.Fatalf("load: %+v from %+v, %v", got, src, err)
			}
			// The backup is the previous version.
			var bak ConsumerOffsetFile
			if _, err := Load(fsys, path+BakSuffix, &bak); err != nil || !reflect.DeepEqual(bak, v1) {
				t.Fatalf("backup: %+v, %v", bak, err)
			}
			// What we write is standard JSON with quoted queue ids.
			raw, _ := readOrNone(fsys, path)
			if !strings.Contains(raw, `"0": 300`) {
				t.Fatalf("written form:\n%s", raw)
			}
		})
	}
}

// TestConfigLoadFallsBackToBak damages the main file in each way Load must survive and checks
// that the backup is used, that Load says so, and that nothing of the damaged file leaks into
// the value.
func TestConfigLoadFallsBackToBak(t *testing.T) {
	for name, damaged := range map[string]*string{
		"missing":       nil,
		"empty":         ptr(""),
		"white space":   ptr(" \n\t"),
		"torn":          ptr(`{"offsetTable":{"TopicTest@g":{"0":999,"7":1`),
		"garbage":       ptr("\x00\x00\x00\x00"),
		"wrong type":    ptr(`{"offsetTable":{"TopicTest@g":{"0":"many"}}}`),
		"not an object": ptr(`[1,2,3]`),
	} {
		t.Run(name, func(t *testing.T) {
			m := newMem(t, "store/config")
			v1 := offsetsFile(250, 251)
			if err := Save(m, offsetsPath, v1); err != nil {
				t.Fatal(err)
			}
			if err := Save(m, offsetsPath, offsetsFile(260)); err != nil {
				t.Fatal(err)
			}
			if damaged == nil {
				if err := m.Remove(offsetsPath); err != nil {
					t.Fatal(err)
				}
			} else if err := WriteFileAtomic(m, offsetsPath, []byte(*damaged)); err != nil {
				t.Fatal(err)
			}
			// Pre-filled, to show that the value is replaced, not merged into.
			got := offsetsFile(1, 2, 3, 4, 5, 6, 7, 8)
			src, err := Load(m, offsetsPath, &got)
			if err != nil {
				t.Fatal(err)
			}
			if src.Path != offsetsPath+BakSuffix || !src.FromBackup() || src.MainErr == nil {
				t.Fatalf("source %+v", src)
			}
			if !reflect.DeepEqual(got, v1) {
				t.Fatalf("loaded %+v, want %+v", got, v1)
			}
			if damaged == nil && !errors.Is(src.MainErr, fs.ErrNotExist) || damaged != nil && !errors.Is(src.MainErr, ErrCorrupt) {
				t.Fatalf("MainErr %v", src.MainErr)
			}
		})
	}
}

func TestConfigLoadFailures(t *testing.T) {
	m := newMem(t, "store/config")
	var v ConsumerOffsetFile

	// Main damaged, no backup: corrupt, and not mistaken for a fresh store.
	if err := WriteFileAtomic(m, offsetsPath, []byte("{")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(m, offsetsPath, &v)
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("damaged main, no backup: %v", err)
	}
	// Both damaged.
	if err := WriteFileAtomic(m, offsetsPath+BakSuffix, []byte("")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(m, offsetsPath, &v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("both damaged: %v", err)
	}
	// Main missing, backup damaged.
	if err := m.Remove(offsetsPath); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(m, offsetsPath, &v); !errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no main, damaged backup: %v", err)
	}

	// A read error of the main file is not a reason to go back one version.
	if err := Save(m, offsetsPath, offsetsFile(1)); err != nil {
		t.Fatal(err)
	}
	failMain := vfs.NewFaulty(m, func(op vfs.Op, name string) error {
		if op == vfs.OpReadFile && name == offsetsPath {
			return vfs.ErrInjected
		}
		return nil
	})
	if src, err := Load(failMain, offsetsPath, &v); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("read error: %+v, %v", src, err)
	}

	if _, err := Load(m, offsetsPath, v); err == nil {
		t.Fatal("Load into a non-pointer succeeded")
	}
	if err := Save(m, offsetsPath, make(chan int)); err == nil {
		t.Fatal("Save of a value JSON cannot encode succeeded")
	}
}

// TestConfigSaveKeepsGoodBackup: saving over a damaged main file must not copy the damage over
// the last good backup.
func TestConfigSaveKeepsGoodBackup(t *testing.T) {
	m := newMem(t, "store/config")
	v1 := offsetsFile(10)
	if err := Save(m, offsetsPath, v1); err != nil {
		t.Fatal(err)
	}
	if err := Save(m, offsetsPath, offsetsFile(20)); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(m, offsetsPath, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if err := Save(m, offsetsPath, offsetsFile(30)); err != nil {
		t.Fatal(err)
	}
	var bak ConsumerOffsetFile
	if _, err := Load(m, offsetsPath+BakSuffix, &bak); err != nil || !reflect.DeepEqual(bak, v1) {
		t.Fatalf("backup: %+v, %v", bak, err)
	}
}

// TestConfigSaveCrash simulates a power loss before each step of Save and after it returns: Load
// must always succeed with the old value or the new one (the old one until the new file's
// rename was issued, the new one once Save returned), and never fall back further.
func TestConfigSaveCrash(t *testing.T) {
	older, old, nw := offsetsFile(1), offsetsFile(2, 2), offsetsFile(3, 3, 3)
	for _, fresh := range []bool{false, true} {
		m := newMem(t, "store/config")
		if !fresh {
			for _, v := range []ConsumerOffsetFile{older, old} {
				if err := Save(m, offsetsPath, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		mainRenamed := false
		var steps []string
		for _, p := range crashDuring(t, m, func(fsys vfs.FS) error { return Save(fsys, offsetsPath, nw) }) {
			steps = append(steps, p.when)
			mainRenamed = mainRenamed || p.when == "before Rename "+offsetsPath+TmpSuffix
			for i, img := range p.images {
				var got ConsumerOffsetFile
				_, err := Load(img, offsetsPath, &got)
				isOld := (fresh && errors.Is(err, fs.ErrNotExist)) || (!fresh && err == nil && reflect.DeepEqual(got, old))
				isNew := err == nil && reflect.DeepEqual(got, nw)
				switch {
				case !isOld && !isNew:
					t.Fatalf("fresh=%v, crash %s, image %d: %+v, %v", fresh, p.when, i, got, err)
				case !mainRenamed && !isOld:
					t.Fatalf("fresh=%v, crash %s, image %d: new value before its rename", fresh, p.when, i)
				case p.when == "after return" && !isNew:
					t.Fatalf("fresh=%v, image %d: lost after Save returned", fresh, i)
				}
			}
		}
		if !fresh && len(steps) != 1+5+5+1 {
			t.Fatalf("steps: %q", steps)
		}
	}
}

func ptr[T any](v T) *T { return &v }
