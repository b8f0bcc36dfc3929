package indexfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestDetectGeometryRocketMQ: the geometry of index files RocketMQ wrote is read from them.
func TestDetectGeometryRocketMQ(t *testing.T) {
	// The index directory of a store RocketMQ 5.3.3 wrote with maxHashSlotNum 2000 and
	// maxIndexNum 8000 (internal/rmqfixture).
	fixtureIndex := filepath.Join(rmqfixture.Dir(t), "store-5000", "index")
	got, err := DetectGeometry(vfs.Default, fixtureIndex)
	if err != nil {
		t.Fatal(err)
	}
	want := Geometry{Slots: 2000, Entries: 8000}
	if got.Size != want.FileSize() || !slices.Equal(got.Fitting, []Geometry{want}) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// writtenImage is the bytes of a file of geometry g into which keys keys were put by the real
// writer (phy offsets growing, several keys a message), after prev end values (a rolled file).
func writtenImage(t *testing.T, g Geometry, keys int, prevPhy, prevTS int64, rng *rand.Rand) []byte {
	t.Helper()
	fsys := vfs.NewMem()
	f, err := CreateFile(fsys, "f", g, 0, prevPhy, prevTS)
	if err != nil {
		t.Fatal(err)
	}
	phy, ts := prevPhy, prevTS+1_700_000_000_000
	for i := range keys {
		if rng.IntN(3) == 0 { // a new message; otherwise another key of the same one
			phy += 100 + int64(rng.IntN(5000))
			ts += int64(rng.IntN(3000))
		}
		if err := f.PutKey(fmt.Sprintf("T#key-%d-%d", i, rng.Int()), phy, ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := fsys.ReadFile("f")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFittingGeometries: the geometry a file was written with always fits it; with a slot
// table of realistic size it is the only one; a file without keys names none.
func TestFittingGeometries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	geos := []Geometry{
		{Slots: 1024, Entries: 4096}, {Slots: 1024, Entries: 8192}, {Slots: 64, Entries: 512},
		{Slots: 2000, Entries: 8000}, {Slots: 500, Entries: 100}, {Slots: 97, Entries: 1001},
		{Slots: 8, Entries: 6}, {Slots: 5, Entries: 7}, {Slots: 1, Entries: 2},
	}
	for _, g := range geos {
		for _, keys := range []int{1, 2, 5, 40, int(g.Entries) - 1} {
			if keys > int(g.Entries)-1 {
				continue
			}
			for _, rolled := range []bool{false, true} {
				var prevPhy, prevTS int64
				if rolled {
					prevPhy, prevTS = 1<<33+7, 1_600_000_000_000
				}
				data := writtenImage(t, g, keys, prevPhy, prevTS, rng)
				fit, err := FittingGeometries(data)
				if err != nil {
					t.Fatalf("%+v, %d keys, rolled %v: %v", g, keys, rolled, err)
				}
				if !slices.Contains(fit, g) {
					t.Fatalf("%+v, %d keys, rolled %v: %v does not list it", g, keys, rolled, fit)
				}
				if g.Slots >= 64 && len(fit) != 1 {
					t.Fatalf("%+v, %d keys, rolled %v: %v", g, keys, rolled, fit)
				}
			}
		}
		empty := writtenImage(t, g, 0, 0, 0, rng)
		if fit, err := FittingGeometries(empty); err != nil || fit != nil {
			t.Fatalf("%+v without keys: %v, %v", g, fit, err)
		}
		if any, err := GeometryOfSize(g.FileSize()); err != nil || any.FileSize() != g.FileSize() {
			t.Fatalf("geometry of %d bytes: %+v, %v", g.FileSize(), any, err)
		}
	}
	if g, err := GeometryOfSize(DefaultGeometry.FileSize()); err != nil || g != DefaultGeometry {
		t.Fatalf("geometry of the default size: %+v, %v", g, err)
	}
}

// TestFittingGeometriesRefuses: bytes that are no index file of keys, or an entry damaged,
// fit no geometry, and a wrong geometry does not fit a written file.
func TestFittingGeometriesRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := Geometry{Slots: 1024, Entries: 4096}
	data := writtenImage(t, g, 300, 0, 0, rng)
	for _, wrong := range []Geometry{{Slots: 1029, Entries: 4095}, {Slots: 1019, Entries: 4097}, {Slots: 4, Entries: 4300}} {
		if wrong.FileSize() != g.FileSize() {
			t.Fatalf("test geometry %+v: %d bytes", wrong, wrong.FileSize())
		}
		if wrong.Fits(data) {
			t.Fatalf("%+v fits a file of %+v", wrong, g)
		}
	}
	if _, err := FittingGeometries(data[:len(data)-2]); !errors.Is(err, ErrNotIndexFile) {
		t.Fatalf("odd size: %v", err)
	}
	damaged := slices.Clone(data)
	at := g.EntryOffset(1) + 4 // entry 1's physical offset no longer the header's begin
	damaged[at+7]++
	if _, err := FittingGeometries(damaged); !errors.Is(err, ErrNotIndexFile) {
		t.Fatalf("damaged entry: %v", err)
	}
	garbage := make([]byte, len(data))
	for i := range garbage {
		garbage[i] = byte(rng.IntN(256))
	}
	copy(garbage, data[:HeaderSize])
	if _, err := FittingGeometries(garbage); !errors.Is(err, ErrNotIndexFile) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestDetectGeometryDir: files of a directory are read oldest first until one geometry is left;
// a zero-length file (being created) is left out; files of two sizes are an error.
func TestDetectGeometryDir(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	g := Geometry{Slots: 8, Entries: 6} // small enough for two geometries to fit one file
	write := func(name string, data []byte) {
		t.Helper()
		f, err := vfs.Default.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := DetectGeometry(vfs.Default, filepath.Join(dir, "missing")); err != nil || got.Size != 0 {
		t.Fatalf("missing directory: %+v, %v", got, err)
	}
	write("20260101000000000", writtenImage(t, g, 0, 0, 0, rng))
	write("20260101000000001", nil)
	got, err := DetectGeometry(vfs.Default, dir)
	if err != nil || got.Size != g.FileSize() || got.Fitting != nil {
		t.Fatalf("keyless files: %+v, %v", got, err)
	}
	for i := range 20 {
		write(fmt.Sprintf("2026010100000%04d", i+2), writtenImage(t, g, 1+rng.IntN(5), int64(i)<<20, 0, rng))
	}
	got, err = DetectGeometry(vfs.Default, dir)
	if err != nil || !slices.Contains(got.Fitting, g) {
		t.Fatalf("with keys: %+v, %v", got, err)
	}
	write("20260101000000099", writtenImage(t, Geometry{Slots: 16, Entries: 6}, 1, 0, 0, rng))
	if _, err := DetectGeometry(vfs.Default, dir); err == nil {
		t.Fatal("files of two sizes: no error")
	}
}

// FuzzFittingGeometries reads arbitrary bytes as an index file of unknown geometry: it must not
// panic, and every geometry it names has the file's size and fits it.
func FuzzFittingGeometries(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fit, err := FittingGeometries(data)
		if err != nil {
			if fit != nil {
				t.Fatalf("%v with geometries %v", err, fit)
			}
			return
		}
		if fit == nil && Keys(data) > 0 {
			t.Fatalf("a file of %d keys with no geometry and no error", Keys(data))
		}
		for _, g := range fit {
			if g.FileSize() != int64(len(data)) || !g.Fits(data) || g.Validate() != nil {
				t.Fatalf("%+v named for %d bytes", g, len(data))
			}
		}
		if g, err := GeometryOfSize(int64(len(data))); err == nil && g.FileSize() != int64(len(data)) {
			t.Fatalf("geometry of %d bytes: %+v", len(data), g)
		}
	})
}
