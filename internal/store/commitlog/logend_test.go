package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestLogAtMaxEnd: a CommitLog whose last segment is the last one below 2^63 (the seam: a
// segment file named there, as a store that long would have) takes records up to it, with their
// physical offsets stamped near 2^63; the record that needs the next segment is refused with
// segment.ErrEnd and changes nothing (no filler, no file), and a restart recovers every record.
// Before the bound, the log rolled into a segment whose end wrapped negative.
func TestLogAtMaxEnd(t *testing.T) {
	const size = 64 << 10
	for _, pwrite := range []bool{false, true} {
		dir := t.TempDir()
		last := segment.MaxEnd(size) - size
		if err := os.WriteFile(filepath.Join(dir, segment.Name(last)), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		l := openTestLogWrites(t, vfs.Default, dir, size, pwrite)
		if res, err := l.Recover(RecoverOptions{}); err != nil || res.End != last {
			t.Fatalf("recover the empty last segment: %+v, %v", res, err)
		}
		var phys []int64
		var err error
		for seq := range 100 {
			var p int64
			if p, err = l.Append(encodeTest(t, seq, 1000, true), int64(seq), 1, true); err != nil {
				break
			}
			if err = l.Commit(); err != nil {
				break
			}
			phys = append(phys, p)
		}
		if !errors.Is(err, segment.ErrEnd) || len(phys) < 50 {
			t.Fatalf("pwrite %v: after %d records: %v, want ErrEnd", pwrite, len(phys), err)
		}
		end := l.MaxOffset()
		if _, err := l.Append(encodeTest(t, 0, 1000, true), 0, 1, true); !errors.Is(err, segment.ErrEnd) || l.MaxOffset() != end {
			t.Fatalf("pwrite %v: append again: %v, end %d -> %d", pwrite, err, end, l.MaxOffset())
		}
		if n := len(l.Queue().Files()); n != 1 || l.Queue().Last().End() != segment.MaxEnd(size) {
			t.Fatalf("pwrite %v: %d segments, the last ending at %d", pwrite, n, l.Queue().Last().End())
		}
		v, release, err := l.Read(phys[len(phys)-1])
		if err != nil || v.PhysicalOffset() != phys[len(phys)-1] {
			t.Fatalf("pwrite %v: read the last record: %v", pwrite, err)
		}
		release()
		if err := l.Flush(end); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		l = openTestLogWrites(t, vfs.Default, dir, size, pwrite)
		res, err := l.Recover(RecoverOptions{From: last, Check: Check{RequirePropCRC: true}})
		if err != nil || res.End != end || res.Records != int64(len(phys)) {
			t.Fatalf("pwrite %v: recovered %+v, %v; want %d records to %d", pwrite, res, err, len(phys), end)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
