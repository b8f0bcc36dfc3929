package indexfile

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/vfs"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzDecodeHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			if len(b) >= HeaderSize || !errors.Is(err, ErrShort) {
				t.Fatalf("DecodeHeader(%d bytes): %v", len(b), err)
			}
			return
		}
		var out [HeaderSize]byte
		h.Put(out[:])
		if !bytes.Equal(out[:], b[:HeaderSize]) {
			t.Fatalf("round trip %x -> %+v -> %x", b[:HeaderSize], h, out)
		}
		_ = h.TimeMatched(h.BeginTimestamp, h.EndTimestamp)
	})
}

func FuzzDecodeEntry(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			if len(b) >= EntrySize || !errors.Is(err, ErrShort) {
				t.Fatalf("DecodeEntry(%d bytes): %v", len(b), err)
			}
			return
		}
		var out [EntrySize]byte
		e.Put(out[:])
		if !bytes.Equal(out[:], b[:EntrySize]) {
			t.Fatalf("round trip %x -> %+v -> %x", b[:EntrySize], e, out)
		}
	})
}

// FuzzSelect queries an arbitrary file image: it must not panic, must terminate on any chain
// (cycles, out-of-range prevIndex), must respect maxNum and may only return offsets of entries
// that carry the queried hash. Then it loads the image as a writable file and puts into it.
func FuzzSelect(f *testing.F) {
	f.Fuzz(func(t *testing.T, img []byte, slots, entries uint8, keyHash int32, maxNum uint8, begin, end int64) {
		g := Geometry{Slots: 1 + int32(slots%32), Entries: 2 + int32(entries%64)}
		file, err := openImage(img, g)
		if err != nil {
			t.Fatal(err)
		}
		got := file.SelectPhyOffsets(nil, keyHash, int(maxNum), begin, end)
		if len(got) > int(maxNum) {
			t.Fatalf("%d offsets for maxNum %d", len(got), maxNum)
		}
		carriers := map[int64]bool{}
		for no := int32(1); no < g.Entries; no++ {
			if e := file.entryAt(no); e.KeyHash == keyHash {
				carriers[e.PhyOffset] = true
			}
		}
		for _, phy := range got {
			if !carriers[phy] {
				t.Fatalf("offset %d from no entry with hash %d", phy, keyHash)
			}
		}
		n := 0
		file.Each(func(int32, Entry) bool { n++; return true })
		if h := file.Header(); n != int(h.IndexCount)-1 || h.IndexCount < 1 || h.IndexCount > g.Entries {
			t.Fatalf("Each visited %d entries, header %+v", n, h)
		}

		// The same bytes as a file on disk, written to after loading.
		fsys := vfs.NewMem()
		fh, err := fsys.Create("f")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, g.FileSize())
		copy(buf, img)
		if _, err := fh.Write(buf); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		wf, err := OpenFile(fsys, "f", g, 0, vfs.ReadWrite)
		if err != nil {
			t.Fatal(err)
		}
		defer wf.Close()
		h := max(keyHash, 0)
		for i := range 3 {
			err := wf.PutHash(h, int64(i), begin)
			if errors.Is(err, ErrFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := wf.SelectPhyOffsets(nil, h, 64, -1<<63, 1<<63-1); len(got) == 0 || got[0] != int64(i) {
				t.Fatalf("put %d: query %v does not start with it", i, got)
			}
		}

		// The same bytes relinked as recovery does after a crash (header, slots and entries all
		// possibly torn): the header then counts exactly the entries kept, every link and slot
		// names an entry kept and older, and puts after it never link an entry to itself.
		rfs := vfs.NewMem()
		rh, err := rfs.Create("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rh.Write(buf); err != nil {
			t.Fatal(err)
		}
		rh.Close()
		rf, err := OpenFile(rfs, "f", g, 0, vfs.ReadWrite)
		if err != nil {
			t.Fatal(err)
		}
		defer rf.Close()
		kept, _, err := rf.Relink(soundEntries(max(begin, 0), 0), 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c := rf.Header().IndexCount; c != kept+1 {
			t.Fatalf("relink kept %d entries, the header counts %d", kept, c)
		}
		for s := range g.Slots {
			if v := rf.loadSlot(g.SlotOffset(s)); v < 0 || v > kept {
				t.Fatalf("slot %d names %d after a relink that kept %d", s, v, kept)
			}
		}
		for i := range 2 {
			if err := rf.PutHash(h, int64(1<<40+i), begin); err != nil && !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
		}
		for no := int32(1); no < rf.Header().IndexCount; no++ {
			if e := rf.entryAt(no); e.PrevIndex < 0 || e.PrevIndex >= no {
				t.Fatalf("entry %d links to %d after relink", no, e.PrevIndex)
			}
		}
	})
}

func FuzzKeyHash(f *testing.F) {
	f.Fuzz(func(t *testing.T, topic, key string) {
		if got, want := KeyHash(topic, key), javahash.IndexKeyHash(topic+"#"+key); got != want {
			t.Fatalf("KeyHash(%q, %q) = %d, want %d", topic, key, got, want)
		}
	})
}
