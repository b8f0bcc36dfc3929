package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// rocketMQRewrite does to the checkpoint what RocketMQ does when it runs on the store (see
// the RocketMQ fixtures' checkpoint/ (internal/rmqfixture)): its 40 bytes written from its own values, every
// other byte of the page left as it was.
func rocketMQRewrite(t *testing.T, fsys vfs.FS, dir string, set func(c *checkpoint.Checkpoint)) {
	t.Helper()
	name := filepath.Join(dir, checkpoint.FileName)
	page, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var c checkpoint.Checkpoint
	if c, err = checkpoint.Decode(page); err != nil {
		t.Fatal(err)
	}
	set(&c)
	c.Ext = checkpoint.Ext{}
	copy(page, checkpoint.Encode(c)[:40])
	writeWhole(t, fsys, name, page)
}

func writeWhole(t *testing.T, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// rocketMQAppend writes records after end as RocketMQ's broker would: without the __CRC32#
// property, with a UNIQ_KEY and a key, at the next queue offsets of topic-0 queue 0, through
// its own mapping of the segment. It returns where each record went and the new end.
func rocketMQAppend(t *testing.T, fsys vfs.FS, dir string, segSize, end, nextQueueOffset int64, n int, ts int64) ([]int64, int64) {
	t.Helper()
	name := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", end-end%segSize))
	seg, err := fsys.OpenSegment(name, segSize, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Reserve(segSize); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := range n {
		props := commitlog.AppendProperty(nil, commitlog.PropKeys, fmt.Sprintf("rmq-key-%d", i))
		props = commitlog.AppendProperty(props, commitlog.PropUniqKey, fmt.Sprintf("rmq-id-%d", i))
		rec, err := commitlog.AppendRecord(nil, &commitlog.Message{
			Topic: "topic-0", QueueID: 0, BornTimestamp: ts, Body: fmt.Appendf(nil, "from RocketMQ %d", i),
			BornHost: netip.MustParseAddrPort("10.0.0.1:5000"), StoreHost: netip.MustParseAddrPort("10.0.0.2:10911"),
			Properties: props,
		}, commitlog.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pos := end % segSize
		if pos+int64(len(rec))+commitlog.BlankSize > segSize {
			t.Fatalf("no room for RocketMQ's record %d at %d", i, end)
		}
		commitlog.Stamp(rec, nextQueueOffset+int64(i), end, ts+int64(i), false)
		copy(seg.Data()[pos:], rec)
		offs = append(offs, end)
		end += int64(len(rec))
	}
	if err := seg.Sync(0, segSize); err != nil {
		t.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	return offs, end
}

// TestRecoveryAfterRocketMQRanOnTheStore: a store the engine wrote and stopped cleanly, then
// RocketMQ ran on it: its checkpoint is RocketMQ's 40 bytes over the engine's extension, and
// RocketMQ exited abnormally (the abort file is there). The engine takes that checkpoint as
// valid: no index file is dropped, nothing is rebuilt from the start, and records RocketMQ
// appended (without the __CRC32# property the engine's own records carry) are kept, put in
// their ConsumeQueue and found by key.
func TestRecoveryAfterRocketMQRanOnTheStore(t *testing.T) {
	for _, appended := range []int{0, 5} {
		t.Run(fmt.Sprintf("%d records appended", appended), func(t *testing.T) {
			fsys := vfs.NewMem()
			opts := testOptions(t, "/store")
			opts.FS = fsys
			e := mustOpen(t, opts)
			acked := putMany(t, e, 2, 3000, 0)
			end := e.Offsets().Written
			next := int64(len(acked["topic-0/0"]))
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			lastStart, ts := int64(0), int64(0)
			for _, rs := range acked {
				for _, r := range rs {
					lastStart, ts = max(lastStart, r.PhysOffset), max(ts, r.StoreTimestamp)
				}
			}
			var theirs []int64
			if appended > 0 {
				theirs, end = rocketMQAppend(t, fsys, opts.Dir, opts.CommitLogFileSize, end, next, appended, ts+1000)
				lastStart = theirs[len(theirs)-1]
			}
			rocketMQRewrite(t, fsys, opts.Dir, func(c *checkpoint.Checkpoint) {
				c.ConfirmPhyOffset = lastStart // set in its recovery: the start of the last record
				if appended > 0 {
					c.PhysicMsgTimestamp = ts + 1000 + int64(appended) - 1
				}
			})
			if err := meta.CreateAbort(fsys, opts.Dir, 4242); err != nil {
				t.Fatal(err)
			}

			e2 := mustOpen(t, opts)
			defer e2.Close()
			rec := e2.Recovery()
			if rec.CleanExit || !rec.FromCheckpoint || len(rec.IndexDropped) != 0 || rec.IndexEntriesDropped != 0 {
				t.Fatalf("recovery %+v: want the checkpoint's offsets used and no index dropped", rec)
			}
			if rec.End != end || rec.Records != int64(appended) || rec.Tail != "clean" {
				t.Fatalf("recovery %+v: want %d records re-dispatched up to %d", rec, appended, end)
			}
			checkQueues(t, e2, acked)
			cq := e2.cq.Find("topic-0", 0)
			for i, phys := range theirs {
				if u, err := cq.Unit(next + int64(i)); err != nil || u.Phys != phys {
					t.Fatalf("RocketMQ's record %d: unit %+v, %v; want it at %d", i, u, err, phys)
				}
				found, err := e2.Query(context.Background(), QueryRequest{Topic: "topic-0", Key: fmt.Sprintf("rmq-key-%d", i)})
				if err != nil || !slices.ContainsFunc(found, func(m ReadMessage) bool { return m.PhysicalOffset == phys }) {
					t.Fatalf("RocketMQ's record %d not found by its key: %v, %v", i, found, err)
				}
			}
			for _, r := range acked["topic-1/3"] {
				found, err := e2.Query(context.Background(), QueryRequest{Topic: r.Topic, Key: fmt.Sprintf("key-%d", r.QueueOffset*8+7)})
				if err != nil || len(found) == 0 {
					t.Fatalf("%s@%d not found by its key: %v", r.Topic, r.QueueOffset, err)
				}
			}
		})
	}
}

// TestFirstCheckpointCarriesTheTimestamps: right after a start that re-dispatched nothing (a
// clean stop before), the checkpoint written at start says what RocketMQ needs: the timestamps
// of the data, not zeros, so that a kill -9 before the first thorough flush leaves RocketMQ a
// checkpoint it can recover from without starting at the first file and dropping every index
// file.
func TestFirstCheckpointCarriesTheTimestamps(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, dir)
	opts.FS = vfs.Default
	e := mustOpen(t, opts)
	acked := putMany(t, e, 2, 200, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, rs := range acked {
		for _, r := range rs {
			last = max(last, r.StoreTimestamp)
		}
	}
	e2 := mustOpen(t, opts)
	defer e2.Close()
	if rec := e2.Recovery(); rec.Records != 0 {
		t.Fatalf("recovery after a clean stop re-dispatched %d records", rec.Records)
	}
	cp, err := checkpoint.Load(vfs.Default, filepath.Join(dir, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for name, ts := range map[string]int64{"physic": cp.PhysicMsgTimestamp, "logics": cp.LogicsMsgTimestamp, "index": cp.IndexMsgTimestamp} {
		if ts < last || ts > now {
			t.Fatalf("%s timestamp %d after the restart; the last record was stored at %d: %+v", name, ts, last, cp)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, meta.AbortFileName)); err != nil {
		t.Fatalf("abort file: %v", err)
	}
}

// TestRecoveryAfterRocketMQRewroteTheTail: RocketMQ ran on the store, cut the log below the
// engine's last checkpoint and wrote records of other sizes over the cut part, so that the
// checkpoint's dispatched offset falls inside one of them. A scan from there would take the
// rest of the log for a torn tail and cut RocketMQ's records; recovery sees that no record
// starts there and recovers by RocketMQ's fields instead, keeping every record.
func TestRecoveryAfterRocketMQRewroteTheTail(t *testing.T) {
	fsys := vfs.NewMem()
	opts := testOptions(t, "/store")
	opts.FS = fsys
	e := mustOpen(t, opts)
	var res []Result
	for i := range 40 {
		r, err := e.Put(context.Background(), Message{Topic: "topic-0", Body: fmt.Appendf(nil, "engine %d %0100d", i, i), MsgID: fmt.Sprintf("e-%d", i)})
		if err != nil || r[0].Err != nil {
			t.Fatal(err, r[0].Err)
		}
		res = append(res, r[0])
	}
	end := e.Offsets().Written
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cut := res[37]
	theirs, newEnd := rocketMQAppend(t, fsys, opts.Dir, opts.CommitLogFileSize, cut.PhysOffset, cut.QueueOffset, 6, cut.StoreTimestamp+1)
	if slices.Contains(theirs, end) || newEnd <= end {
		t.Fatalf("RocketMQ's records at %v, to %d: the old end %d must fall inside one", theirs, newEnd, end)
	}
	rocketMQRewrite(t, fsys, opts.Dir, func(c *checkpoint.Checkpoint) { c.ConfirmPhyOffset = theirs[len(theirs)-1] })
	if err := meta.CreateAbort(fsys, opts.Dir, 4242); err != nil {
		t.Fatal(err)
	}

	e2 := mustOpen(t, opts)
	defer e2.Close()
	rec := e2.Recovery()
	if rec.End != newEnd || rec.Tail != "clean" || rec.Cut != 0 {
		t.Fatalf("recovery %+v: want every record kept, up to %d", rec, newEnd)
	}
	cq := e2.cq.Find("topic-0", 0)
	if got, want := cq.MaxOffset(), cut.QueueOffset+int64(len(theirs)); got != want {
		t.Fatalf("queue holds %d units, want %d", got, want)
	}
	for i, phys := range theirs {
		if u, err := cq.Unit(cut.QueueOffset + int64(i)); err != nil || u.Phys != phys {
			t.Fatalf("RocketMQ's record %d: unit %+v, %v; want it at %d", i, u, err, phys)
		}
	}
	for _, r := range res[:37] {
		if u, err := cq.Unit(r.QueueOffset); err != nil || u.Phys != r.PhysOffset {
			t.Fatalf("engine record @%d: unit %+v, %v; want it at %d", r.QueueOffset, u, err, r.PhysOffset)
		}
	}
}

// The store the checkpoints of the RocketMQ fixtures' checkpoint/ (internal/rmqfixture) describe: the
// engine's durable and dispatched offsets, RocketMQ's confirm offset (the start of the last
// record) and the store timestamp of every field.
const (
	fixtureEnd        = 29429172
	fixtureLastRecord = 29428371
	fixtureTimestamp  = 1796156530133
)

// fixtureStore writes, through the engine, a store whose records end exactly where the fixture
// checkpoints say, with a last record of the size they imply, all stored at their timestamp,
// and stops it cleanly. It returns the number of records.
func fixtureStore(t *testing.T, opts Options) int {
	t.Helper()
	opts.Now = func() time.Time { return time.UnixMilli(fixtureTimestamp) }
	e := mustOpen(t, opts)
	put := func(i, n int) {
		t.Helper()
		r, err := e.Put(context.Background(), Message{Topic: "fixture", Body: make([]byte, n),
			Keys: []string{fmt.Sprintf("k%06d", i)}, MsgID: fmt.Sprintf("m%06d", i)})
		if err != nil || r[0].Err != nil {
			t.Fatal(err, r[0].Err)
		}
	}
	put(0, 0)
	overhead := e.Offsets().Written // every record here is this plus its body
	n := 0
	for i := 1; ; i++ {
		at := e.Offsets().Written
		left := fixtureLastRecord - at
		if left == 0 {
			put(i, int(fixtureEnd-fixtureLastRecord-overhead))
			n = i + 1
			break
		}
		put(i, int(min(left-overhead, 1<<20)))
		if got := e.Offsets().Written; got-at != overhead+min(left-overhead, 1<<20) {
			t.Fatalf("record %d took %d bytes, want %d", i, got-at, overhead+min(left-overhead, 1<<20))
		}
	}
	if got := e.Offsets().Written; got != fixtureEnd {
		t.Fatalf("store ends at %d, want %d", got, fixtureEnd)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoveryWithTheRocketMQFixtureCheckpoints puts the fixture checkpoints, byte for byte, on
// the store they describe: the one an older engine wrote (its version-1 extension) opens as a
// clean stop from its offsets; the same file after RocketMQ rewrote it, with an abnormal exit,
// recovers from those offsets too and drops no index file (before, the engine found it corrupt,
// recovered from the start and dropped every index file). With an earlier physicMsgTimestamp
// too (a RocketMQ that stored messages of its own) the older extension can no longer be checked:
// recovery then goes by RocketMQ's fields, scanning the log, and still drops no index file,
// since none is newer than RocketMQ's indexMsgTimestamp.
func TestRecoveryWithTheRocketMQFixtureCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		file    string
		abort   bool
		traffic bool
	}{
		{"engine-written", false, false}, {"engine-written", true, false},
		{"after-rocketmq", false, false}, {"after-rocketmq", true, false}, {"after-rocketmq", true, true},
	} {
		t.Run(fmt.Sprintf("%s abort=%v traffic=%v", tc.file, tc.abort, tc.traffic), func(t *testing.T) {
			fsys := vfs.NewMem()
			opts := testOptions(t, "/store")
			opts.FS, opts.CommitLogFileSize = fsys, 32<<20
			n := fixtureStore(t, opts)
			page, err := os.ReadFile(filepath.Join("..", "internal", "store", "checkpoint", "testdata", "rocketmq-5.3.3", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if tc.traffic {
				binary.BigEndian.PutUint64(page, fixtureTimestamp-1000)
			}
			writeWhole(t, fsys, filepath.Join(opts.Dir, checkpoint.FileName), page)
			if tc.abort {
				if err := meta.CreateAbort(fsys, opts.Dir, 4242); err != nil {
					t.Fatal(err)
				}
			}
			e := mustOpen(t, opts)
			defer e.Close()
			rec := e.Recovery()
			start, records := int64(fixtureEnd), int64(0)
			if tc.traffic {
				start, records = 0, int64(n)
			}
			if rec.CleanExit == tc.abort || rec.FromCheckpoint == tc.traffic || rec.Start != start || rec.End != fixtureEnd ||
				rec.Records != records || len(rec.IndexDropped) != 0 || rec.IndexEntriesDropped != 0 {
				t.Fatalf("recovery %+v: want it from %d to %d, %d records re-dispatched, nothing dropped", rec, start, fixtureEnd, records)
			}
			for i := range n {
				found, err := e.Query(context.Background(), QueryRequest{Topic: "fixture", Key: fmt.Sprintf("k%06d", i)})
				if err != nil || len(found) != 1 {
					t.Fatalf("record %d not found by its key: %v, %v", i, found, err)
				}
				if i == n-1 && found[0].PhysicalOffset != fixtureLastRecord {
					t.Fatalf("last record at %d, want %d", found[0].PhysicalOffset, fixtureLastRecord)
				}
			}
		})
	}
}
