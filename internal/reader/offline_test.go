package reader

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

func openOffline(t testing.TB, fsys vfs.FS, dir string, geo geometry) *Reader {
	t.Helper()
	opts := OfflineOptions{CommitLogFileSize: geo.segment, ConsumeQueueUnits: geo.units, StoreHost: storeHost, NoIndex: geo.index == nil}
	if geo.index != nil {
		opts.IndexSlots, opts.IndexEntries = int(geo.index.Slots), int(geo.index.Entries)
	}
	r, err := OpenOffline(fsys, dir, opts)
	noErr(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// readQueue reads a queue from offset from to its end with r.
func readQueue(t *testing.T, r *Reader, topic string, queue int32, from int64, tags ...string) (msgs []Message, next int64) {
	t.Helper()
	next = from
	for {
		res, err := r.Get(t.Context(), GetRequest{Topic: topic, QueueID: queue, Offset: next, Max: 5, Tags: tags})
		noErr(t, err)
		msgs = append(msgs, res.Messages...)
		if res.NextOffset == next {
			return msgs, next
		}
		next = res.NextOffset
	}
}

func TestOfflineReader(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", tiny)
	want := mixed(s, 15)
	off := openOffline(t, fsys, "/store", tiny)

	got, next := readQueue(t, off, "T", 0, 0)
	if next != 15 || len(got) != 15 {
		t.Fatalf("offline read %d messages, next %d", len(got), next)
	}
	for i := range want {
		checkMessage(t, got[i], want[i])
	}
	m, err := off.Lookup(got[7].MsgID)
	noErr(t, err)
	checkMessage(t, m, want[7])
	if q := query(t, off, QueryRequest{Topic: "T", Key: "order-7"}); !slices.Equal(q, []int64{want[7].phys}) {
		t.Fatalf("offline query %v", q)
	}
	for _, r := range []*Reader{s.r, off} {
		offs, err := r.Offsets("T")
		noErr(t, err)
		if offs[0].Max != 15 || offs[0].MaxStoreTime != want[14].ts {
			t.Fatalf("offsets %+v", offs)
		}
	}
	at, err := off.OffsetForTime("T", 0, want[3].ts)
	if err != nil || at != 3 {
		t.Fatalf("offline OffsetForTime %d, %v", at, err)
	}

	// Written after the reader opened: invisible until Refresh.
	later := mixed(s, 12)
	newest := s.put(msg{topic: "New", keys: "fresh", body: body(99)})
	if res := get(t, off, GetRequest{Topic: "T", Offset: 15}); res.Status != OffsetOverflowOne {
		t.Fatalf("before Refresh: %v", res.Status)
	}
	if _, err := off.Lookup(commitlog.OffsetMsgID(storeHost, newest)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup before Refresh: %v", err)
	}
	if q := query(t, off, QueryRequest{Topic: "New", Key: "fresh"}); len(q) != 0 {
		t.Fatalf("query before Refresh: %v", q)
	}
	// Half a Refresh: the ConsumeQueues show units whose records lie in segments the
	// reader has not mapped; Get stops there, as at the end of the queue.
	noErr(t, off.cq.Refresh())
	part, partNext := readQueue(t, off, "T", 0, 15)
	if partNext >= 27 || len(part) != int(partNext-15) {
		t.Fatalf("with the CommitLog not refreshed: %d messages, next %d", len(part), partNext)
	}
	res := get(t, off, GetRequest{Topic: "T", Offset: partNext})
	if res.Status != OffsetOverflowOne || res.MaxOffset != partNext {
		t.Fatalf("at a unit past the mapped CommitLog: %v, max %d", res.Status, res.MaxOffset)
	}
	noErr(t, off.Refresh())
	got, next = readQueue(t, off, "T", 0, 15)
	if next != 27 || len(got) != 12 {
		t.Fatalf("after Refresh: %d messages, next %d", len(got), next)
	}
	for i := range got {
		w := later[i]
		if got[i].PhysicalOffset != w.phys || string(got[i].Body) != string(w.body) {
			t.Fatalf("message %d after Refresh: phys %d, want %d", i, got[i].PhysicalOffset, w.phys)
		}
	}
	if _, err := off.Lookup(commitlog.OffsetMsgID(storeHost, newest)); err != nil {
		t.Fatalf("Lookup after Refresh: %v", err)
	}
	if q := query(t, off, QueryRequest{Topic: "New", Key: "fresh"}); !slices.Equal(q, []int64{newest}) {
		t.Fatalf("query after Refresh: %v", q)
	}
	// A segment the writer is creating (still empty) is left out, not an error.
	creating := "/store/commitlog/" + segment.Name(s.log.Queue().Last().End())
	f, err := fsys.Create(creating)
	noErr(t, err)
	noErr(t, f.Close())
	noErr(t, off.Refresh())
	noErr(t, fsys.Remove(creating))
	if fmt.Sprint(off.Topics()) != fmt.Sprint(s.r.Topics()) {
		t.Fatalf("topics %v, want %v", off.Topics(), s.r.Topics())
	}

	// No long polling offline.
	off.waiting = func() { t.Error("an offline reader waited") }
	if res, err := off.Get(t.Context(), GetRequest{Topic: "T", Offset: 27, Wait: time.Hour}); err != nil || res.Status != OffsetOverflowOne {
		t.Fatalf("offline wait: %v, %v", res.Status, err)
	}
	if err := s.r.Refresh(); err == nil {
		t.Fatal("Refresh of an engine's reader succeeded")
	}
	noErr(t, off.Close())
	noErr(t, off.Close())
	if _, err := off.Get(t.Context(), GetRequest{Topic: "T"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := off.Lookup(got[0].MsgID); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lookup after Close: %v", err)
	}
	if err := off.Refresh(); err == nil {
		t.Fatal("Refresh after Close succeeded")
	}
	if _, err := OpenOffline(fsys, "/nowhere", OfflineOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}

// treeSum hashes every path, size and content under root.
func treeSum(t *testing.T, root string) [32]byte {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		h.Write([]byte(p))
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			h.Write(b)
			return err
		}
		return nil
	})
	noErr(t, err)
	return [32]byte(h.Sum(nil))
}

// TestOfflineWhileWriting reads a store on the real file system while another goroutine writes
// it (appends, dispatches, rolls segments, ConsumeQueue files and index files): every message
// the offline reader returns is the right one, in order, none is skipped (also with a tag
// filter, whose newest unit may be caught half written), and after the writer stops one
// Refresh shows everything. The reader changes nothing on disk.
func TestOfflineWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s := newTestStore(t, vfs.Default, dir, tiny)
	tag := func(i int) string { return []string{"even", "odd"}[i%2] }
	s.put(msg{tags: tag(0), keys: "k0", body: body(0)})
	off := openOffline(t, vfs.Default, dir, tiny)
	// Map the queue now: from then on each Refresh scans it before it opens the index (a
	// queue first used after a Refresh is scanned then, and may show units the index
	// opened by that Refresh lacks).
	readQueue(t, off, "T", 0, 0)

	const n = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i < n; i++ {
			s.put(msg{tags: tag(i), keys: fmt.Sprintf("k%d", i), body: body(i)})
			if i%3 == 0 {
				s.put(msg{topic: "U", body: body(-i)})
			}
		}
	}()
	var all, even []Message
	var next, nextEven int64
	round := func() {
		noErr(t, off.Refresh())
		msgs, nx := readQueue(t, off, "T", 0, next)
		all, next = append(all, msgs...), nx
		msgs, nx = readQueue(t, off, "T", 0, nextEven, "even")
		even, nextEven = append(even, msgs...), nx
		// A message whose successor this Refresh showed is wholly dispatched (the writer
		// applies records in order, each to its ConsumeQueue and then to the index), so the
		// index opened by the same Refresh has it.
		if n := len(all); n >= 2 {
			m := all[n-2]
			if q := query(t, off, QueryRequest{Topic: "T", Key: fmt.Sprintf("k%d", m.QueueOffset)}); !slices.Equal(q, []int64{m.PhysicalOffset}) {
				t.Fatalf("query k%d: %v, want %d", m.QueueOffset, q, m.PhysicalOffset)
			}
			if got, err := off.Lookup(m.MsgID); err != nil || got.QueueOffset != m.QueueOffset {
				t.Fatalf("lookup %s: %v", m.MsgID, err)
			}
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			round()
		}
	}
	round()
	if len(all) != n || next != n {
		t.Fatalf("read %d messages, next %d, want %d", len(all), next, n)
	}
	for i, m := range all {
		if m.QueueOffset != int64(i) || string(m.Body) != string(body(i)) || m.Tags != tag(i) {
			t.Fatalf("message %d: offset %d body %q tags %q", i, m.QueueOffset, m.Body, m.Tags)
		}
	}
	if len(even) != n/2 {
		t.Fatalf("%d even messages, want %d", len(even), n/2)
	}
	for i, m := range even {
		if m.QueueOffset != int64(2*i) {
			t.Fatalf("even message %d at offset %d", i, m.QueueOffset)
		}
	}
	before := treeSum(t, dir)
	noErr(t, off.Refresh())
	readQueue(t, off, "T", 0, 0)
	query(t, off, QueryRequest{Topic: "T", Key: "k1"})
	noErr(t, off.Close())
	if treeSum(t, dir) != before {
		t.Fatal("the offline reader changed the store")
	}
}
