package verify

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/vfs"
)

// Small files, so that a store of a few hundred messages spans several segments, queue files
// and index files.
const (
	testSegment = 32 << 10
	testUnits   = 64
	testSlots   = 64
	testEntries = 256
)

const testDir = "/store"

func engineOptions(t testing.TB, fsys vfs.FS, dir string) engine.Options {
	return engine.Options{
		Dir:               dir,
		FS:                fsys,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		CommitLogFileSize: testSegment,
		ConsumeQueueUnits: testUnits,
		IndexSlots:        testSlots,
		IndexEntries:      testEntries,
	}
}

func options(fsys vfs.FS, dir string) Options {
	return Options{
		FS: fsys, Dir: dir,
		CommitLogFileSize: testSegment, ConsumeQueueUnits: testUnits,
		IndexSlots: testSlots, IndexEntries: testEntries,
	}
}

// put stores n messages over 3 topics x 2 queues, with tags, keys and ids, and returns them.
func put(t testing.TB, e *engine.Engine, first, n int) []engine.Result {
	t.Helper()
	var out []engine.Result
	for i := 0; i < n; {
		var msgs []engine.Message
		for j := 0; j < 25 && i < n; j, i = j+1, i+1 {
			k := first + i
			topic := fmt.Sprintf("topic-%d", k%3)
			msgs = append(msgs, engine.Message{
				Topic: topic, QueueID: int32(k / 3 % 2),
				Body: []byte(fmt.Sprintf("%s/%06d|%s", topic, k, strings.Repeat("x", k%200))),
				Tags: fmt.Sprintf("tag%d", k%4), Keys: []string{fmt.Sprintf("key-%d", k), fmt.Sprintf("order-%d", k%7)},
				MsgID: fmt.Sprintf("id-%08d", k),
			})
		}
		res, err := e.Put(context.Background(), msgs...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		out = append(out, res...)
	}
	return out
}

// newStore writes n messages through an engine into a fresh Mem and closes it cleanly.
func newStore(t testing.TB, n int) (*vfs.Mem, []engine.Result) {
	t.Helper()
	fsys := vfs.NewMem()
	e, err := engine.Open(engineOptions(t, fsys, testDir))
	if err != nil {
		t.Fatal(err)
	}
	res := put(t, e, 0, n)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys, res
}

func mustVerify(t testing.TB, fsys vfs.FS) *Report {
	t.Helper()
	r, err := Verify(context.Background(), options(fsys, testDir))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dump(r *Report) string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

func requireClean(t testing.TB, r *Report) {
	t.Helper()
	if !r.Consistent() || r.Verdict != VerdictConsistent {
		t.Fatalf("store not consistent:\n%s", dump(r))
	}
}

// requireProblem fails unless r has a problem of kind at offset in a file whose name contains
// file, and returns it.
func requireProblem(t testing.TB, r *Report, kind Kind, file string, offset int64) Problem {
	t.Helper()
	for _, p := range r.Problems {
		if p.Kind == kind && strings.Contains(p.File, file) && p.Offset == offset {
			return p
		}
	}
	t.Fatalf("no %s problem in %q at %d:\n%s", kind, file, offset, dump(r))
	return Problem{}
}

// patch changes the bytes of a file in place through a writable mapping.
func patch(t testing.TB, fsys vfs.FS, name string, fn func(b []byte)) {
	t.Helper()
	st, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := fsys.OpenSegment(name, st.Size, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Reserve(st.Size); err != nil {
		t.Fatal(err)
	}
	fn(seg.Data())
	if err := seg.Sync(0, st.Size); err != nil {
		t.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
}

func logFile(base int64) string {
	return path.Join(testDir, "commitlog", fmt.Sprintf("%020d", base))
}
