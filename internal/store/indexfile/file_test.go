package indexfile

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/vfs"
)

// tiny is a geometry small enough to fill in a test: 8 slots, 5 entries (4 keys).
var tiny = Geometry{Slots: 8, Entries: 5}

func newMemFile(t *testing.T, fsys vfs.FS, g Geometry, step int64) *File {
	t.Helper()
	f, err := CreateFile(fsys, "f", g, step, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func mustPut(t *testing.T, f *File, key string, phy, ts int64) {
	t.Helper()
	if err := f.PutKey(key, phy, ts); err != nil {
		t.Fatalf("PutKey(%q, %d, %d): %v", key, phy, ts, err)
	}
}

func TestSelectNewestFirstWithTimeFilter(t *testing.T) {
	f := newMemFile(t, vfs.NewMem(), Geometry{Slots: 64, Entries: 100}, 0)
	const t0 = 1_700_000_000_000
	// key A at t0, t0+10s, t0+20s, t0+30s; key B interleaved.
	for i := range int64(4) {
		mustPut(t, f, "T#A", 100*i, t0+i*10_000)
		mustPut(t, f, "T#B", 100*i+50, t0+i*10_000+5_000)
	}
	cases := []struct {
		name       string
		begin, end int64
		max        int
		want       []int64
	}{
		{"all", 0, 1 << 62, 64, []int64{300, 200, 100, 0}},
		{"maxNum", 0, 1 << 62, 2, []int64{300, 200}},
		{"inclusive bounds", t0 + 10_000, t0 + 20_000, 64, []int64{200, 100}},
		{"newer excluded", t0, t0 + 15_000, 64, []int64{100, 0}},
		{"begin stops the walk", t0 + 25_000, t0 + 40_000, 64, []int64{300}},
		{"nothing", t0 + 31_000, t0 + 40_000, 64, nil},
		{"maxNum 0", 0, 1 << 62, 0, nil},
	}
	for _, c := range cases {
		got := f.SelectKey(nil, "T#A", c.max, c.begin, c.end)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// dst counts toward maxNum, as the list RocketMQ shares across files does.
	if got := f.SelectKey([]int64{-1, -2}, "T#A", 3, 0, 1<<62); !slices.Equal(got, []int64{-1, -2, 300}) {
		t.Errorf("with dst: got %v", got)
	}
	// The time of an entry is beginTimestamp + timeDiff*1000: seconds, truncated.
	mustPut(t, f, "T#C", 999, t0+1_999)
	if got := f.SelectKey(nil, "T#C", 64, t0+1_000, t0+1_000); !slices.Equal(got, []int64{999}) {
		t.Errorf("truncated time: got %v", got)
	}
}

// TestHashCollision documents that the index compares hashes only: "Aa" and "BB" have one
// String.hashCode, so a query for either returns both, and the caller must check the key.
func TestHashCollision(t *testing.T) {
	if javahash.String("T#Aa") != javahash.String("T#BB") {
		t.Fatal("keys do not collide")
	}
	f := newMemFile(t, vfs.NewMem(), tiny, 0)
	mustPut(t, f, "T#Aa", 10, 1000)
	mustPut(t, f, "T#BB", 20, 2000)
	for _, key := range []string{"T#Aa", "T#BB"} {
		if got := f.SelectKey(nil, key, 64, 0, 1<<62); !slices.Equal(got, []int64{20, 10}) {
			t.Errorf("%s: got %v, want both offsets [20 10]", key, got)
		}
	}
	// Same slot, different hash: the chain is shared, the hash filters.
	var other string
	for i := 0; ; i++ {
		other = fmt.Sprintf("T#k%d", i)
		h := javahash.IndexKeyHash(other)
		if h%tiny.Slots == javahash.IndexKeyHash("T#Aa")%tiny.Slots && h != javahash.IndexKeyHash("T#Aa") {
			break
		}
	}
	mustPut(t, f, other, 30, 3000)
	if got := f.SelectKey(nil, other, 64, 0, 1<<62); !slices.Equal(got, []int64{30}) {
		t.Errorf("%s: got %v, want [30]", other, got)
	}
	if got := f.SelectKey(nil, "T#Aa", 64, 0, 1<<62); !slices.Equal(got, []int64{20, 10}) {
		t.Errorf("T#Aa after a same-slot key: got %v", got)
	}
	if h := f.Header(); h.HashSlotCount != 1 || h.IndexCount != 4 {
		t.Errorf("header %+v: want 1 slot used, indexCount 4", h)
	}
}

func TestFileFull(t *testing.T) {
	f := newMemFile(t, vfs.NewMem(), tiny, 0)
	for i := range int64(4) {
		if f.Full() {
			t.Fatalf("full after %d keys", i)
		}
		mustPut(t, f, fmt.Sprint("T#", i), i, 1000+i)
	}
	if !f.Full() {
		t.Fatal("not full after Entries-1 keys")
	}
	if err := f.PutKey("T#x", 9, 9); !errors.Is(err, ErrFull) {
		t.Fatalf("put into full file: %v", err)
	}
	n := 0
	if err := f.Each(func(no int32, e Entry) bool {
		n++
		if e.PhyOffset != int64(no-1) {
			t.Errorf("entry %d: phy %d", no, e.PhyOffset)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("Each visited %d entries", n)
	}
}

func TestFileTimeDiffRules(t *testing.T) {
	f := newMemFile(t, vfs.NewMem(), Geometry{Slots: 16, Entries: 16}, 0)
	const t0 = 1_700_000_000_000
	mustPut(t, f, "T#a", 0, t0)              // first entry: begin 0 => timeDiff 0, begin := t0
	mustPut(t, f, "T#b", 1, t0-5_000)        // negative => 0
	mustPut(t, f, "T#c", 2, t0+2_999)        // truncated => 2
	mustPut(t, f, "T#d", 3, t0+(1<<31)*1000) // capped at MaxInt32
	want := []int32{0, 0, 2, 1<<31 - 1}
	for i, w := range want {
		e, ok := f.Entry(int32(i + 1))
		if !ok || e.TimeDiff != w {
			t.Errorf("entry %d: %+v, %v; want timeDiff %d", i+1, e, ok, w)
		}
	}
	if h := f.Header(); h.BeginTimestamp != t0 || h.EndTimestamp != t0+(1<<31)*1000 || h.BeginPhyOffset != 0 || h.EndPhyOffset != 3 {
		t.Errorf("header %+v", h)
	}
}

// TestReserveFailureIsAnError fills the disk: the put fails before writing anything, with no
// fault, and succeeds once there is room again.
func TestReserveFailureIsAnError(t *testing.T) {
	fsys := vfs.NewMem()
	g := Geometry{Slots: 16, Entries: 1000}
	f := newMemFile(t, fsys, g, 64)
	for i := range int64(3) {
		mustPut(t, f, fmt.Sprint("T#", i), i, 1000)
	}
	u, err := fsys.DiskUsage(".")
	if err != nil {
		t.Fatal(err)
	}
	fsys.SetCapacity(int64(u.Total - u.Free)) // exactly what is used: no growth possible
	var err2 error
	for i := int64(3); i < 100 && err2 == nil; i++ {
		err2 = f.PutKey(fmt.Sprint("T#", i), i, 1000)
	}
	if err2 == nil || errors.Is(err2, ErrFull) {
		t.Fatalf("put past the reservation on a full disk: %v", err2)
	}
	before := f.Header()
	if err := f.PutKey("T#again", 1, 1); err == nil {
		t.Fatal("second put succeeded on a full disk")
	}
	if f.Header() != before {
		t.Fatal("a failed put changed the header")
	}
	fsys.SetCapacity(0)
	mustPut(t, f, "T#again", 7, 1000)
	if got := f.SelectKey(nil, "T#again", 8, 0, 1<<62); !slices.Equal(got, []int64{7}) {
		t.Fatalf("after room came back: %v", got)
	}
}

// TestConcurrentReaders runs one writer and several readers on a Mem file, whose bytes are Go
// memory the race detector watches. Every offset a reader gets must belong to its key (keys are
// chosen with distinct hashes), newest first.
func TestConcurrentReaders(t *testing.T) {
	const keys, puts = 16, 2000
	f := newMemFile(t, vfs.NewMem(), Geometry{Slots: 7, Entries: puts + 1}, 256)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range int64(puts) {
			// phy encodes the key: phy % keys == key number.
			if err := f.PutKey(fmt.Sprint("T#", i%keys), i, 1_700_000_000_000+i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // a flusher, as the periodic flush stage would run it
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := f.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []int64
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := int64((i + r) % keys)
				buf = f.SelectKey(buf[:0], fmt.Sprint("T#", k), 1<<30, 0, 1<<62)
				for j, phy := range buf {
					if phy%keys != k || (j > 0 && phy >= buf[j-1]) {
						t.Errorf("key %d: bad result %v", k, buf)
						return
					}
				}
				_ = f.Header()
				_ = f.Each(func(int32, Entry) bool { return true })
			}
		}()
	}
	wg.Wait()
	for k := range int64(keys) {
		if got := f.SelectKey(nil, fmt.Sprint("T#", k), 1<<30, 0, 1<<62); len(got) != puts/keys {
			t.Errorf("key %d: %d offsets, want %d", k, len(got), puts/keys)
		}
	}
}

// image builds a file image by hand: a header, slot values and entries.
func image(g Geometry, h Header, slots map[int32]int32, entries map[int32]Entry) []byte {
	b := make([]byte, g.FileSize())
	h.Put(b)
	for i, v := range slots {
		var e [4]byte
		e[0], e[1], e[2], e[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		copy(b[g.SlotOffset(i):], e[:])
	}
	for no, e := range entries {
		e.Put(b[g.EntryOffset(no):])
	}
	return b
}

// TestCorruptChains: cycles end, entry numbers out of range end the walk, and a chain that
// reaches the unwritten entry indexCount reads it as RocketMQ does.
func TestCorruptChains(t *testing.T) {
	g := Geometry{Slots: 1, Entries: 10}
	h := Header{BeginTimestamp: 1000, EndTimestamp: 1000, IndexCount: 4}
	cycle := map[int32]Entry{
		3: {KeyHash: 5, PhyOffset: 30, PrevIndex: 2},
		2: {KeyHash: 6, PhyOffset: 20, PrevIndex: 3},
	}
	f, err := openImage(image(g, h, map[int32]int32{0: 3}, cycle), g)
	if err != nil {
		t.Fatal(err)
	}
	// Java would loop forever here: hash 7 never matches, so maxNum is never reached.
	if got := f.SelectPhyOffsets(nil, 7, 64, 0, 1<<62); len(got) != 0 {
		t.Errorf("cycle, no match: %v", got)
	}
	if got := f.SelectPhyOffsets(nil, 5, 64, 0, 1<<62); len(got) == 0 || len(got) > int(h.IndexCount)+1 {
		t.Errorf("cycle, match: %v", got)
	}

	// Slot == indexCount: Java reads entry indexCount (unwritten) and stops on its prevIndex.
	atCount := map[int32]Entry{4: {KeyHash: 9, PhyOffset: 40, PrevIndex: 0}}
	f, _ = openImage(image(g, h, map[int32]int32{0: 4}, atCount), g)
	if got := f.SelectPhyOffsets(nil, 9, 64, 0, 1<<62); !slices.Equal(got, []int64{40}) {
		t.Errorf("slot == indexCount: %v", got)
	}
	// Slot > indexCount: empty.
	f, _ = openImage(image(g, h, map[int32]int32{0: 5}, atCount), g)
	if got := f.SelectPhyOffsets(nil, 9, 64, 0, 1<<62); len(got) != 0 {
		t.Errorf("slot > indexCount: %v", got)
	}
	// indexCount at capacity and a prevIndex equal to it: the entry past the file is not read.
	full := Header{BeginTimestamp: 1000, EndTimestamp: 1000, IndexCount: 10}
	f, _ = openImage(image(g, full, map[int32]int32{0: 9}, map[int32]Entry{9: {KeyHash: 9, PhyOffset: 90, PrevIndex: 10}}), g)
	if got := f.SelectPhyOffsets(nil, 9, 64, 0, 1<<62); !slices.Equal(got, []int64{90}) {
		t.Errorf("prev past the file: %v", got)
	}
	// A corrupt count beyond the file is clamped; indexCount 0 loads as 1.
	f, _ = openImage(image(g, Header{IndexCount: 1 << 30}, nil, nil), g)
	if !f.Full() || f.Header().IndexCount != g.Entries {
		t.Errorf("huge count: %+v", f.Header())
	}
	f, _ = openImage(image(g, Header{IndexCount: -3}, nil, nil), g)
	if f.Header().IndexCount != 1 {
		t.Errorf("negative count: %+v", f.Header())
	}
	// A negative timeDiff stops the walk before anything is added.
	f, _ = openImage(image(g, h, map[int32]int32{0: 3}, map[int32]Entry{3: {KeyHash: 1, PhyOffset: 3, TimeDiff: -1, PrevIndex: 2}, 2: {KeyHash: 1, PhyOffset: 2}}), g)
	if got := f.SelectPhyOffsets(nil, 1, 64, 0, 1<<62); len(got) != 0 {
		t.Errorf("negative timeDiff: %v", got)
	}
}

func TestOpenFileReloads(t *testing.T) {
	fsys := vfs.NewMem()
	f, err := CreateFile(fsys, "f", tiny, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, f, "T#a", 1, 1000)
	mustPut(t, f, "T#a", 2, 2000)
	want := f.Header()
	if err := errors.Join(f.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if err := f.PutKey("T#a", 3, 3000); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after Close: %v", err)
	}
	g, err := OpenFile(fsys, "f", tiny, 0, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Header() != want {
		t.Fatalf("reloaded header %+v, want %+v", g.Header(), want)
	}
	mustPut(t, g, "T#a", 3, 3000)
	if got := g.SelectKey(nil, "T#a", 8, 0, 1<<62); !slices.Equal(got, []int64{3, 2, 1}) {
		t.Fatalf("after reload: %v", got)
	}
	if _, err := OpenFile(fsys, "f", Geometry{Slots: 8, Entries: 6}, 0, vfs.ReadOnly); err == nil {
		t.Fatal("opened with the wrong geometry")
	}
	ro, err := OpenFile(fsys, "f", tiny, 0, vfs.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.PutKey("T#a", 4, 4000); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("put into read-only file: %v", err)
	}
}
