package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

var (
	testBorn  = netip.MustParseAddrPort("10.1.2.3:4000")
	testStore = netip.MustParseAddrPort("10.9.8.7:10911")
)

// encodeTest encodes a record with a body of n bytes derived from seq, so that every record of a
// test is different and can be recognised after recovery.
func encodeTest(t testing.TB, seq, n int, propCRC bool) []byte {
	t.Helper()
	body := make([]byte, n)
	for i := range body {
		body[i] = byte(seq*31 + i)
	}
	props := AppendProperty(nil, PropUniqKey, fmt.Sprintf("K%08d", seq))
	m := &Message{
		Topic: fmt.Sprintf("T%d", seq%3), QueueID: int32(seq % 4), BornTimestamp: int64(seq),
		BornHost: testBorn, StoreHost: testStore, Body: body, Properties: props,
	}
	rec, err := AppendRecord(nil, m, EncodeOptions{PropCRC: propCRC})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func openTestLog(t testing.TB, fsys vfs.FS, dir string, size int64) *Log {
	t.Helper()
	return openTestLogWrites(t, fsys, dir, size, false)
}

func openTestLogWrites(t testing.TB, fsys vfs.FS, dir string, size int64, pwrite bool) *Log {
	t.Helper()
	l, err := OpenLog(LogOptions{FS: fsys, Dir: dir, FileSize: size, Prefault: true, Pwrite: pwrite})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLogAppendAcrossSegments runs with records copied into the mapping and with records
// gathered and written by Commit (Pwrite): both must leave the same bytes in the same files.
func TestLogAppendAcrossSegments(t *testing.T) {
	images := map[string][][]byte{}
	for _, pwrite := range []bool{false, true} {
		for _, fsys := range []vfs.FS{vfs.Default, vfs.NewMem()} {
			name := fmt.Sprintf("%T/pwrite=%v", fsys, pwrite)
			t.Run(name, func(t *testing.T) {
				images[fmt.Sprintf("%T", fsys)+fmt.Sprint(pwrite)] = testLogAppendAcrossSegments(t, fsys, pwrite)
			})
		}
	}
	for _, fs := range []string{"vfs.OS", "*vfs.Mem"} {
		mm, pw := images[fs+"false"], images[fs+"true"]
		if len(mm) == 0 || len(mm) != len(pw) {
			t.Fatalf("%s: %d segments copied, %d written", fs, len(mm), len(pw))
		}
		for i := range mm {
			if !bytes.Equal(mm[i], pw[i]) {
				t.Errorf("%s: segment %d differs between copies into the mapping and pwrite", fs, i)
			}
		}
	}
}

// testLogAppendAcrossSegments appends 100 records, reopens and recovers the log, and returns
// the bytes of its segments.
func testLogAppendAcrossSegments(t *testing.T, fsys vfs.FS, pwrite bool) [][]byte {
	dir := filepath.Join(t.TempDir(), "commitlog")
	if _, ok := fsys.(*vfs.Mem); ok {
		dir = "/store/commitlog"
	}
	l := openTestLogWrites(t, fsys, dir, 4096, pwrite)
	var offs []int64
	var recs [][]byte
	for seq := range 100 {
		rec := encodeTest(t, seq, 10+seq*7%300, seq%2 == 0)
		phys, err := l.Append(rec, int64(seq), 1700000000000+int64(seq), seq%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if pwrite && l.MaxOffset() > phys {
			t.Fatalf("record %d at %d: the log's end moved to %d before Commit", seq, phys, l.MaxOffset())
		}
		if seq%5 == 4 {
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if seq > 0 && phys <= offs[len(offs)-1] {
			t.Fatalf("offsets not increasing: %d after %d", phys, offs[len(offs)-1])
		}
		offs, recs = append(offs, phys), append(recs, rec)
		if l.NeedsNext() {
			if err := l.PrepareNext(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Queue().Files()); n < 5 {
		t.Fatalf("only %d segments for 100 records of up to 400 bytes in 4 KiB segments", n)
	}
	// Every segment but the last ends with a blank filler or exactly full.
	for _, f := range l.Queue().Files()[:len(l.Queue().Files())-1] {
		_, tail, err := Scan(f.Data(), 0, Check{}, nil)
		if tail != TailBlank || err != nil {
			t.Fatalf("%s ends with %v, %v", f.Name(), tail, err)
		}
	}
	check := func(l *Log) {
		t.Helper()
		i := 0
		end, err := l.Each(0, l.MaxOffset(), Check{RequirePropCRC: false}, func(phys int64, v View) error {
			if phys != offs[i] || v.QueueOffset() != int64(i) || v.PhysicalOffset() != phys {
				return fmt.Errorf("record %d at %d (queue offset %d), want %d", i, phys, v.QueueOffset(), offs[i])
			}
			if !bytes.Equal(v.Body(), bodyOf(t, recs[i])) {
				return fmt.Errorf("body %d differs", i)
			}
			i++
			return nil
		})
		if err != nil || i != len(offs) || end != l.MaxOffset() {
			t.Fatalf("Each: %v after %d records, end %d of %d", err, i, end, l.MaxOffset())
		}
		v, release, err := l.Read(offs[57])
		if err != nil {
			t.Fatal(err)
		}
		if v.QueueOffset() != 57 || v.StoreTimestamp() != 1700000000057 {
			t.Fatalf("Read: queue offset %d, store ts %d", v.QueueOffset(), v.StoreTimestamp())
		}
		release()
	}
	check(l)
	if err := l.Flush(l.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	end := l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTestLog(t, fsys, dir, 4096)
	defer l.Close()
	res, err := l.Recover(RecoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != end || res.Records != 100 || res.Tail != TailClean {
		t.Fatalf("recovered %+v, want end %d and 100 records", res, end)
	}
	check(l)
	// Appending continues after the recovered end.
	if phys, err := l.Append(encodeTest(t, 100, 50, true), 100, 1, true); err != nil || phys != end {
		t.Fatalf("append after recovery at %d: %v, want %d", phys, err, end)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	var image [][]byte
	for _, f := range l.Queue().Files() {
		image = append(image, bytes.Clone(f.Data()))
	}
	return image
}

// TestLogFailedWriteIsSticky: a write that fails leaves the log's end where it was, and the log
// refuses every later Append and Commit with that error (what the page cache holds after a
// failed write is not known); the records that were written stay readable.
func TestLogFailedWriteIsSticky(t *testing.T) {
	eio := fmt.Errorf("injected: %w", syscall.EIO)
	fsys := vfs.NewFaulty(vfs.NewMem(), vfs.OnNth(vfs.OpSegmentWrite, 2, eio))
	l := openTestLogWrites(t, fsys, "/store/commitlog", 1<<16, true)
	defer l.Close()
	for seq := range 3 {
		if _, err := l.Append(encodeTest(t, seq, 100, true), int64(seq), 1, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	end := l.MaxOffset()
	if _, err := l.Append(encodeTest(t, 3, 100, true), 3, 1, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit: %v, want the write's EIO", err)
	}
	if l.MaxOffset() != end {
		t.Fatalf("end %d after a failed write, want %d", l.MaxOffset(), end)
	}
	if _, err := l.Append(encodeTest(t, 4, 100, true), 4, 1, true); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append after a failed write: %v", err)
	}
	if err := l.Commit(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second commit: %v", err)
	}
	n := 0
	if _, err := l.Each(0, end, Check{}, func(int64, View) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("%d records readable before the failure (%v), want 3", n, err)
	}
}

func TestLogRecoverCutsTornTailAndZeroesIt(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/s/commitlog", 1<<16)
	var ends []int64
	for seq := range 20 {
		phys, err := l.Append(encodeTest(t, seq, 200, true), int64(seq), 1, true)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, phys+int64(len(encodeTest(t, seq, 200, true))))
	}
	f := l.Queue().Last()
	// Tear record 15: flip a byte in its middle.
	torn := ends[14] + 100
	f.Data()[torn] ^= 0xFF
	res, err := l.Recover(RecoverOptions{Check: Check{RequirePropCRC: true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != ends[14] || res.Tail != TailCorrupt || res.Records != 15 {
		t.Fatalf("recovered %+v, want end %d after 15 records", res, ends[14])
	}
	if !allZero(f.Data()[ends[14]:]) {
		t.Fatal("bytes after the recovered end were not zeroed")
	}
	if l.MaxOffset() != ends[14] {
		t.Fatalf("max offset %d", l.MaxOffset())
	}
}

func TestLogRecoverRefusesSealedCorruption(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/s/commitlog", 4096)
	for seq := range 60 {
		if _, err := l.Append(encodeTest(t, seq, 300, false), int64(seq), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(l.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	first := l.Queue().First()
	first.Data()[300] ^= 1 // inside the first record's body: body CRC
	before := l.MaxOffset()
	_, err := l.Recover(RecoverOptions{Sealed: before})
	if !errors.Is(err, ErrSealedCorrupt) {
		t.Fatalf("Recover = %v, want ErrSealedCorrupt", err)
	}
	if l.MaxOffset() != before || len(l.Queue().Files()) < 5 {
		t.Fatal("Recover changed the log although it refused")
	}
}

// TestLogENOSPCOnRoll fills the disk: the append that needs a new segment fails with ENOSPC and
// changes nothing; once space returns, the log carries on where it was.
func TestLogENOSPCOnRoll(t *testing.T) {
	fsys := vfs.NewMem(vfs.WithCapacity(3 * 4096))
	l := openTestLog(t, fsys, "/s/commitlog", 4096)
	rec := encodeTest(t, 1, 900, false)
	var err error
	n := 0
	for ; n < 20; n++ {
		if _, err = l.Append(rec, int64(n), 1, false); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append %d: %v, want ENOSPC", n, err)
	}
	end := l.MaxOffset()
	if _, err := l.Append(rec, int64(n), 1, false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("retry: %v", err)
	}
	if l.MaxOffset() != end {
		t.Fatal("a failed append moved the end")
	}
	fsys.SetCapacity(1 << 20)
	phys, err := l.Append(rec, int64(n), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if phys != l.Queue().Last().Base() {
		t.Fatalf("record after the roll at %d, want the start of segment %d", phys, l.Queue().Last().Base())
	}
	count := 0
	if _, err := l.Each(0, l.MaxOffset(), Check{}, func(int64, View) error { count++; return nil }); err != nil || count != n+1 {
		t.Fatalf("Each: %d records, %v; want %d", count, err, n+1)
	}
}

func TestLogRejectsRecordLargerThanSegment(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/s/commitlog", 4096)
	if _, err := l.Append(encodeTest(t, 1, 4096, false), 0, 1, false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
}

// TestCrashKeepsSyncedPrefix writes records, syncs now and then, takes a crash image and
// recovers it: what comes back must be a prefix of what was written, and must include every
// record that was synced. Over 250 seeds, with pages lost, kept and torn at random.
func TestCrashKeepsSyncedPrefix(t *testing.T) {
	for seed := range uint64(250) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fsys := vfs.NewMem()
			size := int64(8192 << rng.IntN(3))
			l := openTestLog(t, fsys, "/s/commitlog", size)
			type written struct {
				phys int64
				rec  []byte
			}
			var log []written
			synced := 0
			n := 20 + rng.IntN(150)
			for seq := range n {
				rec := encodeTest(t, seq, rng.IntN(700), true)
				phys, err := l.Append(rec, int64(seq), int64(seq), true)
				if err != nil {
					t.Fatal(err)
				}
				log = append(log, written{phys, rec})
				if rng.IntN(10) == 0 {
					if err := l.Flush(l.MaxOffset()); err != nil {
						t.Fatal(err)
					}
					synced = len(log)
				}
				if rng.IntN(20) == 0 && l.NeedsNext() {
					if err := l.PrepareNext(); err != nil {
						t.Fatal(err)
					}
				}
			}
			sealed := l.FlushedOffset()
			img := fsys.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: rng.IntN(2) == 0})
			l2, err := OpenLog(LogOptions{FS: img, Dir: "/s/commitlog", FileSize: size})
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			got := 0
			res, err := l2.Recover(RecoverOptions{Sealed: sealed, Check: Check{RequirePropCRC: true}, OnRecord: func(phys int64, v View) error {
				if got >= len(log) || phys != log[got].phys {
					return fmt.Errorf("record %d at %d is not what was written there", got, phys)
				}
				w := log[got].rec
				// The image holds the stamped copy: compare what the encoder wrote.
				if v.TotalSize() != len(w) || !bytes.Equal(v.Body(), bodyOf(t, w)) || v.QueueOffset() != int64(got) {
					return fmt.Errorf("record %d differs", got)
				}
				got++
				return nil
			}})
			if err != nil {
				t.Fatalf("recover: %v (%+v)", err, res)
			}
			if got < synced {
				t.Fatalf("lost synced records: recovered %d, %d were synced", got, synced)
			}
			if res.End != l2.MaxOffset() {
				t.Fatalf("end %d, max offset %d", res.End, l2.MaxOffset())
			}
			// The recovered log takes new records right after what it kept.
			if _, err := l2.Append(encodeTest(t, n, 10, true), int64(got), 1, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func bodyOf(t testing.TB, rec []byte) []byte {
	t.Helper()
	v, err := Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	return v.Body()
}

func allZero(b []byte) bool { return firstNonZero(b) < 0 }

// BenchmarkLogAppend is stamp + copy of a pre-encoded record into a warm (prefaulted) segment,
// through the writer's real path (roll, blank filler, allocate-ahead done off the timer).
func BenchmarkLogAppend(b *testing.B) {
	for _, size := range []int{128, 1024} {
		for _, crc := range []bool{false, true} {
			b.Run(fmt.Sprintf("record=%d/propcrc=%v", size, crc), func(b *testing.B) {
				enc := func(n int) []byte {
					m := &Message{Topic: "T1", BornHost: testBorn, StoreHost: testStore, Body: make([]byte, n)}
					rec, err := AppendRecord(nil, m, EncodeOptions{PropCRC: crc})
					if err != nil {
						b.Fatal(err)
					}
					return rec
				}
				rec := enc(size - len(enc(0)))
				if len(rec) != size {
					b.Fatalf("record is %d bytes", len(rec))
				}
				l := openTestLog(b, vfs.Default, b.TempDir(), 256<<20)
				defer l.Close()
				if _, err := l.Append(rec, 0, 1, crc); err != nil {
					b.Fatal(err)
				}
				if err := l.PrepareNext(); err != nil {
					b.Fatal(err)
				}
				if err := l.Queue().Last().Prefault(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				qo := int64(1)
				for b.Loop() {
					if _, err := l.Append(rec, qo, 1700000000000, crc); err != nil {
						b.Fatal(err)
					}
					qo++
					if qo&4095 == 0 && l.NeedsNext() {
						b.StopTimer()
						if err := l.PrepareNext(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrec/s")
			})
		}
	}
}

// TestLogReleasesWriterOnRoll: with Pwrite, a segment keeps a descriptor only while it is the
// one written, so that writing through many segments does not pile up descriptors.
func TestLogReleasesWriterOnRoll(t *testing.T) {
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(entries)
	}
	l := openTestLogWrites(t, vfs.Default, t.TempDir(), 4096, true)
	defer l.Close()
	before := fds()
	for seq := range 200 { // 200 records of about 300 bytes: about 15 segments
		if _, err := l.Append(encodeTest(t, seq, 200, true), int64(seq), 1, true); err != nil {
			t.Fatal(err)
		}
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.Queue().Files()); n < 10 {
		t.Fatalf("%d segments: the test wants many rolls", n)
	}
	if grew := fds() - before; grew > 1 {
		t.Fatalf("%d more descriptors after writing %d segments, want the active segment's only", grew, len(l.Queue().Files()))
	}
}
