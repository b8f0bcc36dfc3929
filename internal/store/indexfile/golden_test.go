package indexfile

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/vfs"
)

// The INDEX vector: TV1's uniq key and its two KEYS at phy 0 / ts 1700000000123, then
// OrderID188 again at phy 1000 / ts 1700000002623, into a new file of the default geometry.
const (
	vecTS1  = 1700000000123
	vecTS2  = 1700000002623
	vecPhy2 = 1000
)

// readAt reads n bytes of a file through the OS, not the mapping: what the file holds.
func readAt(t *testing.T, name string, off int64, n int) []byte {
	t.Helper()
	fh, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, n)
	if _, err := fh.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func slotAt(t *testing.T, name string, off int64) int32 {
	return int32(binary.BigEndian.Uint32(readAt(t, name, off, 4)))
}

// checkIndexVector checks every byte the INDEX vector names in file name.
func checkIndexVector(t *testing.T, name string) {
	t.Helper()
	v := golden.Load()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != v.INDEX.FileSize {
		t.Fatalf("file size %d, want %d", st.Size(), v.INDEX.FileSize)
	}
	for i, ge := range v.INDEX.Entries {
		if got := readAt(t, name, ge.EntryFileOffset, EntrySize); !bytes.Equal(got, ge.Entry()) {
			t.Errorf("entry %d (%s) at %d = %x, want %s", i+1, ge.Key, ge.EntryFileOffset, got, ge.EntryHex)
		}
	}
	slots := map[int64]int32{19282460: 1, 5086720: 4, 5086716: 3} // the vector's final slot values
	for off, want := range slots {
		if got := slotAt(t, name, off); got != want {
			t.Errorf("slot at %d = %d, want %d", off, got, want)
		}
	}
	if got := readAt(t, name, 0, HeaderSize); !bytes.Equal(got, golden.Hex(v.INDEX.HeaderHex)) {
		t.Errorf("header = %x, want %s", got, v.INDEX.HeaderHex)
	}
	// Everything else in the slot table and the entry after the last is still zero.
	if got := readAt(t, name, DefaultGeometry.EntryOffset(5), EntrySize); !bytes.Equal(got, make([]byte, EntrySize)) {
		t.Errorf("entry 5 = %x, want zeros", got)
	}
}

// allocated is the disk space a file's blocks take.
func allocated(t *testing.T, name string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestGoldenIndexFile(t *testing.T) {
	v := golden.Load()
	name := filepath.Join(t.TempDir(), "20231114221320123")
	f, err := CreateFile(vfs.Default, name, DefaultGeometry, DefaultReserveStep, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// A new file's header is zero on disk; in memory indexCount is 1.
	if got := readAt(t, name, 0, HeaderSize); !bytes.Equal(got, make([]byte, HeaderSize)) {
		t.Fatalf("new header = %x", got)
	}
	if h := f.Header(); h.IndexCount != 1 || h.HashSlotCount != 0 {
		t.Fatalf("new header in memory = %+v", h)
	}

	e := v.INDEX.Entries
	puts := []struct {
		key     string
		phy, ts int64
	}{{e[0].Key, 0, vecTS1}, {e[1].Key, 0, vecTS1}, {e[2].Key, 0, vecTS1}, {e[3].Key, vecPhy2, vecTS2}}
	for i, p := range puts {
		if err := f.PutKey(p.key, p.phy, p.ts); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if got := binary.BigEndian.Uint32(readAt(t, name, offIndexCount, 4)); got != 2 {
				t.Fatalf("indexCount on disk after the first put = %d, want 2", got)
			}
		}
		if i == 1 {
			if got := slotAt(t, name, e[1].SlotFileOffset); got != 2 {
				t.Fatalf("slot of OrderID188 after its first put = %d, want 2", got)
			}
		}
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	checkIndexVector(t, name)
	if h := f.Header(); h != Header(v.INDEX.HeaderFields) {
		t.Errorf("Header() = %+v, want %+v", h, v.INDEX.HeaderFields)
	}

	// Disk blocks: the header and slot table, plus one reservation step of entries, not 420 MB.
	limit := DefaultGeometry.EntryOffset(0) + DefaultReserveStep + 1<<20
	if got := allocated(t, name); got > limit {
		t.Errorf("allocated %d bytes, want <= %d", got, limit)
	} else {
		t.Logf("allocated %d bytes of a %d-byte file", got, DefaultGeometry.FileSize())
	}
}

func TestGoldenRolledFirstEntry(t *testing.T) {
	v := golden.Load().INDEX_ROLLED_FIRST_ENTRY
	name := filepath.Join(t.TempDir(), "20231114221324000")
	// The previous, full file ended at phy 5000, ts 1700000000000.
	f, err := CreateFile(vfs.Default, name, DefaultGeometry, DefaultReserveStep, 5000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.PutKey(v.Entry.Key, 6000, 1700000003999); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, name, v.Entry.EntryFileOffset, EntrySize); !bytes.Equal(got, v.Entry.Entry()) {
		t.Errorf("entry = %x, want %s", got, v.Entry.EntryHex)
	}
	if got := slotAt(t, name, v.Entry.SlotFileOffset); got != 1 {
		t.Errorf("slot = %d, want 1", got)
	}
	if got := readAt(t, name, 0, HeaderSize); !bytes.Equal(got, golden.Hex(v.HeaderHex)) {
		t.Errorf("header = %x, want %s", got, v.HeaderHex)
	}
}

// fixedNow is 2023-11-14 22:13:20.123 UTC, the vector's store time.
func fixedNow() time.Time { return time.UnixMilli(vecTS1) }
