package commitlog

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocketstore/engine/internal/vfs"
)

// The segment of these tests: large against what is written, as the default 1 GiB is against a
// quiet store, yet cheap to allocate.
const sparseSegment = 256 << 20

// sparseSlack bounds the pages a recovery may bring into the page cache beyond those it must
// read: the kernel reads around every page fault of a mapping (read_ahead_kb, 8 MiB on some
// machines, half of it before the fault and half after).
const sparseSlack = 24 << 20

// writeSparseLog writes records of about 1 KiB through a Log on the real file system until
// before bytes, flushes and takes that as the checkpoint; then another writer (RocketMQ, say:
// records without the __CRC32# property, written through its own descriptor) appends records
// until after more bytes. It returns the checkpoint, the end and the number of records after
// the checkpoint. Nothing is closed cleanly past the checkpoint: it is a crash.
func writeSparseLog(t *testing.T, dir string, before, after int64) (ckpt, end int64, n int) {
	t.Helper()
	l := openTestLogWrites(t, vfs.Default, dir, sparseSegment, true)
	for seq := 0; l.MaxOffset() < before; seq++ {
		if _, err := l.Append(encodeTest(t, seq, 1000, true), int64(seq), 1, true); err != nil {
			t.Fatal(err)
		}
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	ckpt = l.MaxOffset()
	if err := l.Flush(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "00000000000000000000"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end = ckpt
	for seq := 1 << 20; end < ckpt+after; seq++ {
		rec := encodeTest(t, seq, 1000, false)
		Stamp(rec, int64(seq), end, 2, false)
		if _, err := f.WriteAt(rec, end); err != nil {
			t.Fatal(err)
		}
		end += int64(len(rec))
		n++
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return ckpt, end, n
}

// residentPages reports which pages of the file the page cache holds (mincore of a fresh
// mapping: for a shared file mapping it tells the page cache, not this mapping's faults).
func residentPages(t *testing.T, name string) []bool {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// evict drops the file's clean pages from the page cache.
func evict(t *testing.T, name string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestCrashRecoveryReadsWhatWasWritten is the cost of a crash restart, counted in pages read,
// not in time: 16 MiB of records before the checkpoint and 1 MiB after it in a 256 MiB segment,
// the page cache emptied, then Recover from the checkpoint. The pages it brings in must be those
// written after the checkpoint (and the kernel's read-around of them), not the unwritten rest
// of the segment, which a scan that proves the rest zero byte by byte reads in full. Every
// record after the checkpoint, each another writer's without the __CRC32# property, is found.
func TestCrashRecoveryReadsWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	ckpt, end, n := writeSparseLog(t, dir, 16<<20, 1<<20)
	name := filepath.Join(dir, "00000000000000000000")
	evict(t, name)
	before := residentPages(t, name)
	page := int64(os.Getpagesize())
	if count(before, end/page+1, int64(len(before))) > len(before)/2 {
		t.Skip("this file system holds the unwritten part of a fallocated file in memory (tmpfs?): pages touched cannot be told")
	}

	l := openTestLogWrites(t, vfs.Default, dir, sparseSegment, true)
	res, err := l.Recover(RecoverOptions{From: ckpt, Sealed: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	if res.Start != ckpt || res.End != end || res.Tail != TailClean || res.Records != int64(n) {
		t.Fatalf("recovered %+v; want %d records from %d to %d, a clean tail", res, n, ckpt, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	after := residentPages(t, name)
	newly := make([]bool, len(after))
	for i := range after {
		newly[i] = after[i] && !before[i]
	}
	past := int64(count(newly, end/page+1, int64(len(newly)))) * page
	below := int64(count(newly, 0, ckpt/page)) * page
	t.Logf("wrote %d bytes before the checkpoint and %d after; recovery brought in %d bytes before it, %d after the end",
		ckpt, end-ckpt, below, past)
	if past > sparseSlack {
		t.Fatalf("recovery read %d bytes past the end of the data at %d in a %d-byte segment: it costs the segment's size, not what was written",
			past, end, sparseSegment)
	}
	if below > sparseSlack {
		t.Fatalf("recovery from %d read %d bytes before it", ckpt, below)
	}
}

// TestCrashRecoveryFindsStrayBytesFarPastTheEnd: a page that reached the disk far past the last
// record (a torn write) is found although the scan reads only what the file system maps as
// data, and is zeroed, so that it can never be read back as a record.
func TestCrashRecoveryFindsStrayBytesFarPastTheEnd(t *testing.T) {
	dir := t.TempDir()
	ckpt, end, _ := writeSparseLog(t, dir, 64<<10, 16<<10)
	name := filepath.Join(dir, "00000000000000000000")
	stray := int64(200 << 20)
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("stray"), stray); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	l := openTestLogWrites(t, vfs.Default, dir, sparseSegment, true)
	res, err := l.Recover(RecoverOptions{From: ckpt, Sealed: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != end || res.Tail != TailCorrupt || reasonOf(res.Corrupt) != ReasonTornZero {
		t.Fatalf("recovered %+v, %v; want the end at %d and a torn tail", res, res.Corrupt, end)
	}
	if ce := res.Corrupt.(*CorruptError); end+ce.Got != stray {
		t.Fatalf("first non-zero byte reported at %d, the stray bytes are at %d", end+ce.Got, stray)
	}
	data := l.Queue().Last().Data()
	if !allZero(data[stray : stray+5]) {
		t.Fatalf("stray bytes still there: %q", data[stray:stray+5])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// count counts the true values of b[from:to].
func count(b []bool, from, to int64) int {
	n := 0
	for _, x := range b[min(from, int64(len(b))):min(to, int64(len(b)))] {
		if x {
			n++
		}
	}
	return n
}
