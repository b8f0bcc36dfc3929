package rmqfixture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnpack: the archive holds both stores, their descriptions and the checkpoints, with every
// segment at its full size; Dir's files are read-only and Copy's writable.
func TestUnpack(t *testing.T) {
	dir := Dir(t)
	for name, size := range map[string]int64{
		"README.md": -1, "store-5000.jsonl": -1, "edge.jsonl": -1,
		"store-5000/commitlog/00000000000000000000":             CommitLogSize,
		"store-5000/commitlog/00000000000004194304":             CommitLogSize,
		"edge/commitlog/00000000000000000000":                   CommitLogSize,
		"store-5000/consumequeue/jrev_a/0/00000000000000000000": CQUnits * 20,
		"checkpoint/after-rocketmq":                             4096,
	} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if size >= 0 && st.Size() != size {
			t.Errorf("%s: %d bytes, want %d", name, st.Size(), size)
		}
		if st.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: mode %v, want read-only", name, st.Mode())
		}
	}

	dst := filepath.Join(t.TempDir(), "s")
	Copy(t, "store-5000", dst)
	st, err := os.Stat(filepath.Join(dst, "commitlog", "00000000000000000000"))
	if err != nil || st.Size() != CommitLogSize || st.Mode().Perm()&0o200 == 0 {
		t.Fatalf("Copy: %v %v", st, err)
	}
	one := filepath.Join(t.TempDir(), "e.jsonl")
	Copy(t, "edge.jsonl", one)
	if b, err := os.ReadFile(one); err != nil || !strings.Contains(string(b), `"name"`) {
		t.Fatalf("Copy of one file: %v %.80q", err, b)
	}
}

// TestUnpackUnknown: a fixture that is not in the archive is an error that names it.
func TestUnpackUnknown(t *testing.T) {
	err := unpack("store-6000", t.TempDir(), 0o644)
	if err == nil || !strings.Contains(err.Error(), `"store-6000"`) {
		t.Fatalf("unpack of a missing fixture: %v", err)
	}
}
