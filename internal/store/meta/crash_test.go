package meta

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

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

// failEach runs op once per file-system call it makes, failing that call (and only that one)
// with vfs.ErrInjected, and hands check the Mem, the failed operation and op's error. setup
// builds a fresh Mem for each run. It returns how many calls a clean run makes.
func failEach(t *testing.T, setup func() *vfs.Mem, op func(vfs.FS) error, check func(m *vfs.Mem, failed vfs.Op, err error)) int {
	t.Helper()
	for n := 1; ; n++ {
		m := setup()
		calls := 0
		var failed vfs.Op
		f := vfs.NewFaulty(m, func(op vfs.Op, _ string) error {
			calls++
			if calls == n {
				failed = op
				return vfs.ErrInjected
			}
			return nil
		})
		err := op(f)
		if calls < n {
			if err != nil {
				t.Fatalf("clean run: %v", err)
			}
			return n - 1
		}
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("call %d (%v) failed, op returned %v", n, failed, err)
		}
		check(m, failed, err)
	}
}

func newMem(t *testing.T, dirs ...string) *vfs.Mem {
	t.Helper()
	m := vfs.NewMem()
	for _, d := range dirs {
		if err := m.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func readOrNone(fsys vfs.FS, name string) (string, bool) {
	b, err := fsys.ReadFile(name)
	if err != nil {
		return "", false
	}
	return string(b), true
}
