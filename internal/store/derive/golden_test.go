package derive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestGoldenRecords: what each record vector derives, read back from its bytes and worked out
// ahead from its props, is the vector's: its tag code and ConsumeQueue unit, and for TV1 the
// hashes of the INDEX vector's entries.
func TestGoldenRecords(t *testing.T) {
	vecs := golden.Load()
	for name, r := range vecs.Records() {
		t.Run(name, func(t *testing.T) {
			v := parse(t, r.Bytes())
			p := PropsOf(v)
			if got := TagsCode(p, v.StoreTimestamp(), nil); got != r.TagsCode {
				t.Errorf("tag code %d, want %d", got, r.TagsCode)
			}
			var unit [consumequeue.UnitSize]byte
			Unit(r.PhysOffset, v, p, nil).Encode(unit[:])
			if !bytes.Equal(unit[:], r.CQUnit()) {
				t.Errorf("unit %x, want %s", unit, r.CQUnitHex)
			}
			hashes := KeyHashes(nil, TopicPrefix(p.Topic), p)
			if name == "TV1" {
				var want []int32
				for _, e := range vecs.INDEX.Entries[:3] {
					want = append(want, e.KeyHash)
				}
				if !slices.Equal(hashes, want) {
					t.Errorf("key hashes %v, want the INDEX vector's %v", hashes, want)
				}
			}
			if x := Ahead(p, TopicPrefix(p.Topic)); x.Known &&
				(x.TagsCode != r.TagsCode || !slices.Equal(x.Hashes[:x.NHashes], hashes)) {
				t.Errorf("ahead %+v; the vector's tag code %d, hashes %v", x, r.TagsCode, hashes)
			}
		})
	}
}

// The INDEX vector: TV1's uniq key and its two KEYS at phy 0 / ts 1700000000123, then
// OrderID188 again at phy 1000 / ts 1700000002623, into a new file of the default geometry.
const (
	vecTS2  = 1700000002623
	vecPhy2 = 1000
)

// TestGoldenViaBuilder produces the INDEX vector and TV1's ConsumeQueue unit with the Builder:
// TV1's record read back, then a record with the key OrderID188 read back, or fed with what
// Ahead works out. Every byte the vectors name is the vectors'.
func TestGoldenViaBuilder(t *testing.T) {
	vecs := golden.Load()
	tv1 := vecs.TV1
	second := Props{Topic: tv1.Topic, Keys: "OrderID188"}
	rec2 := encode(t, second, 2, commitlog.TxNotType, 0, vecPhy2, vecTS2)
	for _, fed := range []bool{false, true} {
		root := t.TempDir()
		cq, err := consumequeue.Open(consumequeue.Options{FS: vfs.Default, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		index, err := indexfile.Open(indexfile.Options{FS: vfs.Default, Dir: filepath.Join(root, "index"),
			Now: func() time.Time { return time.UnixMilli(tv1.StoreTS) }, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		b := NewBuilder(cq, index, nil)
		if err := b.Apply(tv1.PhysOffset, parse(t, tv1.Bytes())); err != nil {
			t.Fatal(err)
		}
		if fed {
			x := Ahead(second, TopicPrefix(second.Topic))
			err = b.ApplyFed(&Fed{Phys: vecPhy2, Size: int32(len(rec2)), QueueID: 2, StoreTimestamp: vecTS2,
				Topic: second.Topic, Index: x})
		} else {
			err = b.Apply(vecPhy2, parse(t, rec2))
		}
		if err != nil || b.IndexFilled != 0 {
			t.Fatalf("fed %v: %v, filled %d", fed, err, b.IndexFilled)
		}
		if err := errors.Join(cq.FlushAll(0), index.Flush(), index.Close(), cq.Close()); err != nil {
			t.Fatal(err)
		}
		names, err := filepath.Glob(filepath.Join(root, "index", "*"))
		if err != nil || len(names) != 1 {
			t.Fatalf("index files %v, %v", names, err)
		}
		checkIndexVector(t, names[0], vecs)
		unitFile := filepath.Join(root, "consumequeue", tv1.Topic, "1", tv1.CQFileAndPos.File)
		if got := readAt(t, unitFile, tv1.CQFileAndPos.Pos, consumequeue.UnitSize); !bytes.Equal(got, tv1.CQUnit()) {
			t.Errorf("fed %v: TV1's unit %x, want %s", fed, got, tv1.CQUnitHex)
		}
	}
}

// checkIndexVector checks the bytes the INDEX vector names in the file name: its size, header,
// entries, and each slot naming the last entry of the slot.
func checkIndexVector(t *testing.T, name string, vecs *golden.Vectors) {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != vecs.INDEX.FileSize {
		t.Fatalf("file size %d, want %d", st.Size(), vecs.INDEX.FileSize)
	}
	if got := readAt(t, name, 0, indexfile.HeaderSize); !bytes.Equal(got, golden.Hex(vecs.INDEX.HeaderHex)) {
		t.Errorf("header %x, want %s", got, vecs.INDEX.HeaderHex)
	}
	slots := make(map[int64]uint32)
	for i, e := range vecs.INDEX.Entries {
		if got := readAt(t, name, e.EntryFileOffset, indexfile.EntrySize); !bytes.Equal(got, e.Entry()) {
			t.Errorf("entry %d (%s) %x, want %s", i+1, e.Key, got, e.EntryHex)
		}
		slots[e.SlotFileOffset] = uint32(i + 1)
	}
	for off, want := range slots {
		if got := binary.BigEndian.Uint32(readAt(t, name, off, 4)); got != want {
			t.Errorf("slot at %d holds %d, want %d", off, got, want)
		}
	}
}

// readAt reads n bytes of a file through the OS: what the file holds.
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
