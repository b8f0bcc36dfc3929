package vfs

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestOSDropCache: DropCache takes a synced range out of the page cache, pages read through
// the mapping too, keeps everything outside it cached, and the bytes read back the same
// afterwards. The kernel drops whole folios (up to 2 MiB), so the range is 2 MiB-aligned, and an
// unaligned one only must not drop anything outside it.
func TestOSDropCache(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs: the page cache is the file's only copy, nothing can be dropped")
	}
	const size, mib2 = 8 << 20, 2 << 20
	pages := int(size / pageSize)
	seg, err := Default.CreateSegment(filepath.Join(dir, "00000000000000000000"), size, size)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	if err := seg.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := seg.Sync(0, size); err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p < size; p += pageSize { // mapped as a reader would: the kernel keeps mapped pages
		_ = seg.Data()[p]
	}
	resident := func() []byte {
		t.Helper()
		vec := make([]byte, pages)
		d := seg.Data()
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&d[0])), uintptr(len(d)),
			uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		for i := range vec {
			vec[i] &= 1
		}
		return vec
	}
	if r := resident(); bytes.Count(r, []byte{1}) != pages {
		t.Fatalf("before: %d of %d pages cached, want all", bytes.Count(r, []byte{1}), pages)
	}
	check := func(from, to int64, exact bool) {
		t.Helper()
		before := resident()
		if err := seg.DropCache(from, to); err != nil {
			t.Fatal(err)
		}
		for i, v := range resident() {
			off := int64(i) * pageSize
			inside := off >= from && off+pageSize <= to
			if !inside && v != before[i] || exact && inside && v == 1 {
				t.Fatalf("DropCache(%d, %d): page %d (at %d) cached %v", from, to, i, off, v == 1)
			}
		}
	}
	check(mib2, 2*mib2, true)            // one aligned range: all of it goes, nothing else
	check(3*mib2+100, 4*mib2-100, false) // unaligned, inside the last folio: nothing outside goes
	if !bytes.Equal(seg.Data(), want) {
		t.Fatal("the bytes differ after the drop")
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := seg.DropCache(0, size); err != nil {
		t.Fatalf("after Close: %v, want nothing done", err)
	}
}
