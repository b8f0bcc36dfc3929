package consumequeue

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// fuzzUnits is the file size of the fuzzed queue: 8 units, so that a few hundred bytes of
// input make several files and the recovery crosses files and starts at the third from last.
const fuzzUnits = 8

// FuzzUnit checks the unit codec and the recovery scan on arbitrary bytes: decoding never
// panics and round-trips, and recovery over a queue made of the bytes never panics, ends on a
// unit boundary and keeps only valid units before its end.
func FuzzUnit(f *testing.F) {
	f.Add(AppendUnit(nil, unitFor(1)))
	f.Add(append(AppendUnit(AppendUnit(nil, Blank), unitFor(2)), make([]byte, UnitSize)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= UnitSize {
			u := DecodeUnit(data)
			if enc := AppendUnit(nil, u); !bytes.Equal(enc, data[:UnitSize]) {
				t.Fatalf("round trip %x -> %+v -> %x", data[:UnitSize], u, enc)
			}
		}
		n, maxEnd := ScanValid(data)
		if n < 0 || n*UnitSize > len(data) {
			t.Fatalf("scanned %d units of %d bytes", n, len(data))
		}
		for i := range n {
			if !DecodeUnit(data[i*UnitSize:]).Valid() {
				t.Fatalf("unit %d before the end is invalid", i)
			}
		}
		if (n+1)*UnitSize <= len(data) && DecodeUnit(data[n*UnitSize:]).Valid() {
			t.Fatalf("scan stopped at %d before a valid unit", n)
		}
		if want := lastRealEnd(data[:n*UnitSize]); maxEnd != want {
			t.Fatalf("max end %d, want %d", maxEnd, want)
		}
		fuzzRecover(t, data)
	})
}

// fuzzRecover lays data out as the files of one queue in a Mem and recovers it.
func fuzzRecover(t *testing.T, data []byte) {
	const fileSize = fuzzUnits * UnitSize
	if len(data) == 0 || len(data) > 64*fileSize {
		return
	}
	m := vfs.NewMem()
	dir := filepath.Join("store", "consumequeue", "T", "0")
	noErr(t, m.MkdirAll(dir))
	var files [][]byte
	for off := 0; off < len(data); off += fileSize {
		buf := make([]byte, fileSize)
		copy(buf, data[off:])
		files = append(files, buf)
		w, err := m.Create(filepath.Join(dir, segment.Name(int64(off))))
		noErr(t, err)
		_, err = w.Write(buf)
		noErr(t, err)
		noErr(t, w.Close())
	}
	s := openStore(t, m, "store", fuzzUnits)
	defer s.Close()
	_, err := s.Load()
	noErr(t, err)
	cq := s.Find("T", 0)
	maxPhys, err := cq.Recover()
	noErr(t, err)
	end := cq.MaxOffset() * UnitSize
	start := max(0, len(files)-recoverFiles) * fileSize
	all := bytes.Join(files, nil)
	if end < int64(start) || end > int64(len(all)) {
		t.Fatalf("end %d outside [%d, %d]", end, start, len(all))
	}
	for p := int64(start); p < end; p += UnitSize {
		if !DecodeUnit(all[p:]).Valid() {
			t.Fatalf("invalid unit at %d before the end %d", p, end)
		}
	}
	if end < int64(len(all)) && DecodeUnit(all[end:]).Valid() {
		t.Fatalf("recovery stopped at %d before a valid unit", end)
	}
	if want := lastRealEnd(all[start:end]); maxPhys != want || cq.MaxPhysicalOffset() != want {
		t.Fatalf("max physical offset %d, want %d", maxPhys, want)
	}
	if min := cq.MinOffset(); min < 0 || min > cq.MaxOffset() {
		t.Fatalf("min %d, max %d", min, cq.MaxOffset())
	}
	// Whatever was recovered can be read and truncated without a panic.
	buf := make([]Unit, 5)
	if cq.MaxOffset() > cq.MinOffset() {
		if _, err := cq.Read(cq.MinOffset(), buf); err != nil {
			t.Fatal(err)
		}
	}
	noErr(t, cq.TruncateDirty(maxPhys/2))
	noErr(t, cq.CorrectMinOffset(maxPhys/3))
}
