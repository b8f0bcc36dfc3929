package reader

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// odd is a store geometry far from every default: one CommitLog segment holds it all, a
// ConsumeQueue file 7 units, an index file 97 slots and 300 entries.
var odd = geometry{segment: 256 << 10, units: 7, index: &indexfile.Geometry{Slots: 97, Entries: 300}}

// TestOfflineSizesFromFiles: an offline Reader given no sizes reads them from the files of a
// store written with other sizes than the defaults, and reads every message, by queue and by
// key, as one given the right sizes does. Sizes given that contradict the files are refused.
func TestOfflineSizesFromFiles(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", odd)
	var want []int64
	for i := range 40 {
		want = append(want, s.put(msg{queue: int32(i % 2), keys: fmt.Sprintf("k%d", i), body: body(i)}))
	}
	if n := len(s.log.Queue().Files()); n != 1 {
		t.Fatalf("%d segments, want one", n)
	}
	off, err := OpenOffline(fsys, "/store", OfflineOptions{StoreHost: storeHost})
	noErr(t, err)
	defer off.Close()
	qs, err := off.Offsets("T")
	noErr(t, err)
	if len(qs) != 2 || qs[0].Max != 20 || qs[1].Max != 20 {
		t.Fatalf("offsets %+v", qs)
	}
	var got []int64
	for q := range int32(2) {
		msgs, next := readQueue(t, off, "T", q, 0)
		if next != 20 || len(msgs) != 20 {
			t.Fatalf("queue %d: %d messages, next %d", q, len(msgs), next)
		}
		for _, m := range msgs {
			got = append(got, m.PhysicalOffset)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for i, phys := range want {
		if q := query(t, off, QueryRequest{Topic: "T", Key: fmt.Sprintf("k%d", i)}); !slices.Equal(q, []int64{phys}) {
			t.Fatalf("query k%d: %v, want %d", i, q, phys)
		}
	}

	for _, c := range []struct {
		name string
		opts OfflineOptions
		ok   bool
	}{
		{"the right sizes", OfflineOptions{CommitLogFileSize: odd.segment, ConsumeQueueUnits: odd.units, IndexSlots: 97, IndexEntries: 300}, true},
		{"the slots alone", OfflineOptions{IndexSlots: 97}, true},
		{"another segment size", OfflineOptions{CommitLogFileSize: 1 << 30}, false},
		{"other units", OfflineOptions{ConsumeQueueUnits: 8}, false},
		{"another index geometry of the same file size", OfflineOptions{IndexSlots: 92, IndexEntries: 301}, false},
		{"another index file size", OfflineOptions{IndexSlots: 97, IndexEntries: 301}, false},
	} {
		r, err := OpenOffline(fsys, "/store", c.opts)
		if c.ok != (err == nil) || (!c.ok && !errors.Is(err, ErrSizeMismatch)) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err == nil {
			if msgs, _ := readQueue(t, r, "T", 0, 0); len(msgs) != 20 {
				t.Fatalf("%s: %d messages", c.name, len(msgs))
			}
			noErr(t, r.Close())
		}
	}
}

// TestOfflineSizesWrongLastSegment: a last CommitLog segment or ConsumeQueue file whose size is
// not the others' is an error, not a file silently left out (a file of zero length is one
// being created, and is).
func TestOfflineSizesWrongLastSegment(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", tiny)
	for i := range 10 {
		s.put(msg{body: body(i)})
	}
	segs := s.log.Queue().Files()
	next := segs[len(segs)-1].End()
	name := filepath.Join("/store/commitlog", segment.Name(next))
	seg, err := fsys.CreateSegment(name, 2*tiny.segment, 0)
	noErr(t, err)
	noErr(t, seg.Close())
	if _, err := OpenOffline(fsys, "/store", OfflineOptions{}); !errors.Is(err, segment.ErrMixedSizes) {
		t.Fatalf("a segment of twice the size: %v", err)
	}
	if _, err := OpenOffline(fsys, "/store", OfflineOptions{CommitLogFileSize: tiny.segment, ConsumeQueueUnits: tiny.units}); err == nil {
		t.Fatal("a segment of twice the size, sizes given: no error")
	}
	noErr(t, fsys.Remove(name))
	f, err := fsys.Create(name) // being created
	noErr(t, err)
	noErr(t, f.Close())
	r, err := OpenOffline(fsys, "/store", OfflineOptions{})
	noErr(t, err)
	if msgs, _ := readQueue(t, r, "T", 0, 0); len(msgs) != 10 {
		t.Fatalf("%d messages with a segment being created", len(msgs))
	}
	noErr(t, r.Close())
	noErr(t, fsys.Remove(name))

	cqDir := "/store/consumequeue/T/0"
	ents, err := fsys.ReadDir(cqDir)
	noErr(t, err)
	last, _ := segment.ParseName(ents[len(ents)-1].Name)
	seg, err = fsys.CreateSegment(filepath.Join(cqDir, segment.Name(last+int64(tiny.units)*consumequeue.UnitSize)), 3*consumequeue.UnitSize, 0)
	noErr(t, err)
	noErr(t, seg.Close())
	r, err = OpenOffline(fsys, "/store", OfflineOptions{})
	if err == nil {
		_, err = r.Get(t.Context(), GetRequest{Topic: "T"})
		r.Close()
	}
	if err == nil {
		t.Fatal("a ConsumeQueue file of another size: no error")
	}
}

// TestOfflineSizesEmptyAtOpen: a Reader opened on a store that has no file yet takes the
// CommitLog's size from the first segment written since, at a Refresh, and says clearly that it
// must be opened again when the first ConsumeQueue files are not of the default size.
func TestOfflineSizesEmptyAtOpen(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", geometry{segment: odd.segment, units: consumequeue.DefaultUnitsPerFile})
	r, err := OpenOffline(fsys, "/store", OfflineOptions{NoIndex: true})
	noErr(t, err)
	defer r.Close()
	s.put(msg{body: body(0)})
	noErr(t, r.Refresh())
	if msgs, _ := readQueue(t, r, "T", 0, 0); len(msgs) != 1 {
		t.Fatalf("%d messages after the Refresh", len(msgs))
	}

	fsys2 := vfs.NewMem()
	s2 := newTestStore(t, fsys2, "/store", odd)
	r2, err := OpenOffline(fsys2, "/store", OfflineOptions{NoIndex: true})
	noErr(t, err)
	defer r2.Close()
	s2.put(msg{body: body(0)})
	if err := r2.Refresh(); !errors.Is(err, ErrSizeMismatch) {
		t.Fatalf("Refresh after the first files of %d units: %v", odd.units, err)
	}
}

// rocketmqMessage is a line of the store's .jsonl.
type rocketmqMessage struct {
	Topic       string            `json:"topic"`
	QueueID     int32             `json:"queueId"`
	QueueOffset int64             `json:"queueOffset"`
	WroteOffset int64             `json:"wroteOffset"`
	MsgID       string            `json:"msgId"`
	Props       map[string]string `json:"props"`
	Len         int               `json:"len"`
	SHA         string            `json:"sha"`
	InCQ        bool              `json:"inCQ"`
}

// TestOfflineSizesRocketMQStore: the store RocketMQ wrote is read without any size given
// (straight from the read-only fixture: the reader writes nothing): every message by queue,
// with its offsets, id and body, and by its keys.
func TestOfflineSizesRocketMQStore(t *testing.T) {
	// A store RocketMQ 5.3.3 wrote with 4 MiB segments, 500-unit ConsumeQueue files and index
	// files of 2000 slots and 8000 entries; its .jsonl says what it holds.
	rocketmqStore := filepath.Join(rmqfixture.Dir(t), "store-5000")
	f, err := os.Open(rocketmqStore + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []rocketmqMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m rocketmqMessage
		noErr(t, json.Unmarshal(sc.Bytes(), &m))
		want = append(want, m)
	}
	noErr(t, sc.Err())
	r, err := OpenOffline(nil, rocketmqStore, OfflineOptions{})
	noErr(t, err)
	defer r.Close()
	byQueue := map[string][]Message{}
	for _, ti := range r.Topics() {
		for _, q := range ti.Queues {
			msgs, _ := readQueue(t, r, ti.Name, q, 0)
			byQueue[fmt.Sprintf("%s/%d", ti.Name, q)] = msgs
		}
	}
	n := 0
	for i, w := range want {
		if !w.InCQ {
			continue
		}
		n++
		msgs := byQueue[fmt.Sprintf("%s/%d", w.Topic, w.QueueID)]
		if w.QueueOffset >= int64(len(msgs)) {
			t.Fatalf("message %d: queue %s/%d has %d messages", i, w.Topic, w.QueueID, len(msgs))
		}
		m := msgs[w.QueueOffset]
		sum := sha256.Sum256(m.Body)
		if m.PhysicalOffset != w.WroteOffset || m.MsgID != w.MsgID || len(m.Body) != w.Len || hex.EncodeToString(sum[:]) != w.SHA {
			t.Fatalf("message %d: at %d, id %s, %d bytes; want %+v", i, m.PhysicalOffset, m.MsgID, len(m.Body), w)
		}
		if i%25 == 0 {
			if q := query(t, r, QueryRequest{Topic: w.Topic, Key: w.Props["UNIQ_KEY"]}); !slices.Contains(q, w.WroteOffset) {
				t.Fatalf("message %d: query by UNIQ_KEY %v", i, q)
			}
		}
	}
	total := 0
	for _, msgs := range byQueue {
		total += len(msgs)
	}
	if n == 0 || total != n {
		t.Fatalf("read %d messages, the store holds %d", total, n)
	}
}
