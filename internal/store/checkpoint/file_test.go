package checkpoint

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

var (
	cpOld = Checkpoint{
		PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000100, IndexMsgTimestamp: 1699999999000,
		Ext: Ext{Valid: true, DurableOffset: 1 << 20, DispatchedOffset: 1<<20 - 300},
	}
	cpNew = Checkpoint{
		PhysicMsgTimestamp: 1700000005123, LogicsMsgTimestamp: 1700000005000, IndexMsgTimestamp: 1699999999000,
		ConfirmPhyOffset: 2 << 20, Ext: Ext{Valid: true, DurableOffset: 2 << 20, DispatchedOffset: 2<<20 - 226},
	}
	cpThird = Checkpoint{PhysicMsgTimestamp: 1700000009000, Ext: Ext{Valid: true, DurableOffset: 3 << 20}}
)

func TestLoadMissingIsNotExist(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"mem": memWithDir(t, "store"), "os": vfs.Default} {
		dir := "store"
		if name == "os" {
			dir = t.TempDir()
		}
		c, err := Load(fsys, filepath.Join(dir, FileName))
		if !errors.Is(err, fs.ErrNotExist) || c != (Checkpoint{}) {
			t.Fatalf("%s: %+v, %v; want a zero checkpoint and fs.ErrNotExist", name, c, err)
		}
	}
}

func TestSaveLoadOS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	for _, c := range []Checkpoint{cpOld, cpNew, {PhysicMsgTimestamp: 1}} {
		if err := Save(vfs.Default, path, c); err != nil {
			t.Fatal(err)
		}
		got, err := Load(vfs.Default, path)
		if err != nil || got != c {
			t.Fatalf("%+v, %v; want %+v", got, err, c)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != Size {
		t.Fatalf("stat: %v, %v", st, err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestLoadCorrupt(t *testing.T) {
	m := memWithDir(t, "store")
	path := "store/" + FileName
	b := Encode(cpOld)
	b[extOff+10] ^= 1 // the durable offset
	writeFile(t, m, path, b)
	c, err := Load(m, path)
	if !errors.Is(err, ErrCorrupt) || c.Ext.Valid || c.PhysicMsgTimestamp != cpOld.PhysicMsgTimestamp {
		t.Fatalf("%+v, %v; want ErrCorrupt with RocketMQ's fields", c, err)
	}
}

// TestSaveCrashLeavesOldOrNew simulates a power loss before every file-system call Save makes
// and after it returns, under several crash models (unsynced pages lost, kept, torn at a random
// byte, mixed sector by sector, or garbage), and loads the checkpoint from each image: it must be
// the old one or the new one, in full, or, only where the cut tore RocketMQ's 40 bytes mid-way,
// one of the two extensions marked Rewritten (a lower bound: see Save); after Save returns it
// must be the new one. A new file is written whole (tmp, fsync, rename, directory fsync), an
// existing one in place (the backup slot, fsync, the first half, fsync). Each image must also
// take a further Save over whatever the crash left (a stale .tmp, a torn page).
func TestSaveCrashLeavesOldOrNew(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		m := memWithDir(t, "store")
		path := "store/" + FileName
		if !fresh {
			if err := Save(m, path, cpOld); err != nil {
				t.Fatal(err)
			}
		}
		points := crashDuring(t, m, func(fsys vfs.FS) error { return Save(fsys, path, cpNew) })
		var ops []string
		for _, p := range points {
			ops = append(ops, p.when)
			for i, img := range p.images {
				c, err := Load(img, path)
				switch {
				case fresh && errors.Is(err, fs.ErrNotExist):
					c = Checkpoint{} // "old" is no checkpoint at all
				case err != nil:
					t.Fatalf("fresh=%v, crash %s, image %d: %v", fresh, p.when, i, err)
				}
				old := c == cpOld || (fresh && c == Checkpoint{})
				switch {
				case !old && c != cpNew && !tornHeaderOK(t, img, path, c):
					t.Fatalf("fresh=%v, crash %s, image %d: torn checkpoint %+v", fresh, p.when, i, c)
				case p.when == "after return" && c != cpNew:
					t.Fatalf("fresh=%v, image %d: Save returned but a crash lost it: %+v", fresh, i, c)
				}
				if i%7 == 0 {
					if err := Save(img, path, cpThird); err != nil {
						t.Fatalf("save over crash image: %v", err)
					}
					if c, err := Load(img, path); err != nil || c != cpThird {
						t.Fatalf("load after saving over crash image: %+v, %v", c, err)
					}
				}
			}
		}
		want := []string{
			"before OpenUpdate store/checkpoint", "before Read store/checkpoint",
			"before Write store/checkpoint", "before FileSync store/checkpoint",
			"before Write store/checkpoint", "before FileSync store/checkpoint", "after return",
		}
		if fresh {
			want = []string{
				"before OpenUpdate store/checkpoint",
				"before Create store/checkpoint.tmp", "before Write store/checkpoint.tmp",
				"before FileSync store/checkpoint.tmp", "before Rename store/checkpoint.tmp",
				"before SyncDir store", "after return",
			}
		}
		if strings.Join(ops, "; ") != strings.Join(want, "; ") {
			t.Fatalf("fresh=%v: Save's steps:\n got %q\nwant %q", fresh, ops, want)
		}
	}
}

// tornHeaderOK says whether c, loaded from img, is what Save allows a crash to leave besides the
// old and the new checkpoint: one of their extensions marked Rewritten, with RocketMQ's 40 bytes
// as the image holds them, which are then neither the old ones nor the new ones (a write torn
// inside them).
func tornHeaderOK(t *testing.T, img vfs.FS, path string, c Checkpoint) bool {
	t.Helper()
	b, err := img.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ext := c.Ext
	ext.Rewritten = false
	head := string(b[:rocketMQLen])
	return c.Ext.Rewritten && (ext == cpOld.Ext || ext == cpNew.Ext) &&
		head != string(Encode(cpOld)[:rocketMQLen]) && head != string(Encode(cpNew)[:rocketMQLen])
}

// TestSaveFailureAtEachStep fails each file-system call of Save in turn, for a new file and for
// one rewritten in place: Save reports it, the checkpoint on disk (and in a crash image) is
// still a whole one, the old one, or the new one once the step that makes it durable (the
// backup slot's fsync, the directory's fsync) is past; no temporary file is left.
func TestSaveFailureAtEachStep(t *testing.T) {
	path := "store/" + FileName
	for _, fresh := range []bool{false, true} {
		for n := 1; ; n++ {
			m := memWithDir(t, "store")
			if !fresh {
				if err := Save(m, path, cpOld); err != nil {
					t.Fatal(err)
				}
			}
			calls, writes, syncs := 0, 0, 0
			var failed vfs.Op
			f := vfs.NewFaulty(m, func(op vfs.Op, name string) error {
				calls++
				if calls == n {
					failed = op
					return vfs.ErrInjected
				}
				switch op {
				case vfs.OpWrite:
					writes++
				case vfs.OpFileSync:
					syncs++
				}
				return nil
			})
			err := Save(f, path, cpNew)
			if calls < n {
				if err != nil {
					t.Fatal(err)
				}
				if n < 6 {
					t.Fatalf("fresh=%v: Save made only %d calls", fresh, n-1)
				}
				break
			}
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("fresh=%v: call %d (%v) failed: Save returned %v", fresh, n, failed, err)
			}
			// In place, the new checkpoint may stand once the slot is written (durably, after its
			// fsync); a new file once it was renamed into place.
			newNow := (!fresh && writes >= 1) || (fresh && failed == vfs.OpSyncDir)
			newCrash := (!fresh && syncs >= 1) || (fresh && failed == vfs.OpSyncDir)
			for what, fsys := range map[string]vfs.FS{"now": m, "after a crash": m.SyncedImage()} {
				newOK := newNow
				if what != "now" {
					newOK = newCrash
				}
				c, err := Load(fsys, path)
				if fresh && errors.Is(err, fs.ErrNotExist) && (failed != vfs.OpSyncDir || what != "now") {
					continue // no checkpoint, the old state of a new one
				}
				if err != nil || (c != cpOld && !(newOK && c == cpNew)) {
					t.Fatalf("fresh=%v: call %d (%v) failed; checkpoint %s: %+v, %v", fresh, n, failed, what, c, err)
				}
			}
			if _, err := m.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("fresh=%v: call %d (%v) failed: temporary file left: %v", fresh, n, failed, err)
			}
		}
	}
}

// TestSaveInPlaceNeedsNoSpace: on a file system with no byte free, Save rewrites an existing
// checkpoint (the in-place write takes no new block), while a missing one cannot be written and
// nothing is left behind; once there is room it is.
func TestSaveInPlaceNeedsNoSpace(t *testing.T) {
	m := memWithDir(t, "store")
	path := "store/" + FileName
	if err := Save(m, path, cpOld); err != nil {
		t.Fatal(err)
	}
	u, err := m.DiskUsage("store")
	if err != nil {
		t.Fatal(err)
	}
	m.SetCapacity(int64(u.Total - u.Free)) // every byte used
	if err := Save(m, path, cpNew); err != nil {
		t.Fatalf("in place on a full disk: %v", err)
	}
	if c, err := Load(m.SyncedImage(), path); err != nil || c != cpNew {
		t.Fatalf("after an in-place save on a full disk: %+v, %v", c, err)
	}
	other := "store/other-" + FileName
	if err := Save(m, other, cpNew); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a new checkpoint on a full disk: %v, want ENOSPC", err)
	}
	for _, name := range []string{other, other + ".tmp"} {
		if _, err := m.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left behind: %v", name, err)
		}
	}
	m.SetCapacity(0)
	if err := Save(m, other, cpNew); err != nil {
		t.Fatal(err)
	}
}

// crashPoint is one moment of a simulated power loss and the file systems it could leave.
type crashPoint struct {
	when   string // "before <Op> <name>" or "after return"
	images []*vfs.Mem
}

// crashDuring runs op on m through a Faulty wrapper whose injector, before every file-system
// call op makes and once more after op returns, takes crash images of m: what is certain to
// survive, and random images under each crash model (unsynced directory changes lost or kept
// entry by entry; unsynced pages lost, kept, torn or garbage).
func crashDuring(t *testing.T, m *vfs.Mem, op func(vfs.FS) error) []crashPoint {
	t.Helper()
	var points []crashPoint
	take := func(when string) {
		p := crashPoint{when: when, images: []*vfs.Mem{m.SyncedImage()}}
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, uint64(len(points))))
			for _, o := range []vfs.CrashOptions{{}, {UnsyncedDirChanges: true}, {UnsyncedDirChanges: true, GarbageProb: 0.5}} {
				p.images = append(p.images, m.CrashImage(rng, o))
			}
		}
		points = append(points, p)
	}
	f := vfs.NewFaulty(m, func(op vfs.Op, name string) error {
		take("before " + op.String() + " " + name)
		return nil
	})
	if err := op(f); err != nil {
		t.Fatal(err)
	}
	take("after return")
	return points
}

func memWithDir(t *testing.T, dir string) *vfs.Mem {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeFile(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}
