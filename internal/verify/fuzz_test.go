package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"path"
	"sync"
	"testing"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/vfs"
)

// storeFiles lists every file of the store under dir, depth first.
func storeFiles(t testing.TB, fsys vfs.FS, dir string) []string {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		name := path.Join(dir, e.Name)
		if e.IsDir {
			out = append(out, storeFiles(t, fsys, name)...)
		} else {
			out = append(out, name)
		}
	}
	return out
}

var (
	fuzzOnce  sync.Once
	fuzzStore *vfs.Mem
)

// FuzzVerifyRepair damages a clean store at the places the input says (each 7 bytes: which
// file, where, which bits) and checks the contract: Verify never fails or panics on damage,
// and Repair either refuses (ErrNotRepairable) or leaves a store that verifies clean and opens.
func FuzzVerifyRepair(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 10, 0x01, 0})                              // first CommitLog record
	f.Add([]byte{2, 0, 0, 0x40, 0, 0x80, 0})                            // inside the third CommitLog segment
	f.Add([]byte{9, 0, 0, 0, 3, 0xFF, 0})                               // a ConsumeQueue unit
	f.Add([]byte{20, 0, 0, 1, 0x40, 0x10, 0, 21, 0, 0, 0, 60, 0x02, 0}) // two index files
	f.Add([]byte{255, 0, 0, 0, 50, 0x04, 0})                            // the last file
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzOnce.Do(func() { fuzzStore, _ = newStore(t, 150) })
		fsys := fuzzStore.SyncedImage()
		files := storeFiles(t, fsys, testDir)
		for ; len(in) >= 7; in = in[7:] {
			name := files[int(in[0])%len(files)]
			st, err := fsys.Stat(name)
			if err != nil || st.Size == 0 || in[5] == 0 {
				continue
			}
			if path.Base(name) == "lock" || path.Base(name) == "checkpoint" {
				// Plain files: rewritten whole.
				b, _ := fsys.ReadFile(name)
				b[int(binary.BigEndian.Uint32(in[1:5])%uint32(len(b)))] ^= in[5]
				w, _ := fsys.Create(name)
				w.Write(b)
				w.Close()
				continue
			}
			off := int64(binary.BigEndian.Uint32(in[1:5])) % st.Size
			patch(t, fsys, name, func(b []byte) { b[off] ^= in[5] })
		}
		if _, err := Verify(context.Background(), options(fsys, testDir)); err != nil {
			t.Fatalf("verify: %v", err)
		}
		opts := options(fsys, testDir)
		opts.ForceCut = true // a flip only the whole-record CRC sees is still repaired
		rep, err := Repair(context.Background(), opts)
		if errors.Is(err, ErrNotRepairable) {
			return
		}
		if err != nil {
			t.Fatalf("repair: %v\n%s", err, repairText(rep))
		}
		after := rep.After
		if after == nil {
			after = rep.Before
		}
		if !after.Consistent() {
			t.Fatalf("not consistent after repair:\n%s", repairText(rep))
		}
		e, err := engine.Open(engineOptions(t, fsys, testDir))
		if err != nil {
			t.Fatalf("open after repair: %v\n%s", err, repairText(rep))
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
