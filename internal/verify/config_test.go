package verify

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/store/subjecttags"
)

// TestDamagedConfigFile: a config file the engine must read to start (subjectTags.json,
// consumerOffset.json) that neither decodes nor has a backup that does is damage (verdict corrupt),
// reported with the way out; the engine indeed refuses to open the store; Repair changes
// nothing; a damaged file whose backup decodes is no problem (the engine reads the backup); once
// the way out is taken, the store verifies and opens.
func TestDamagedConfigFile(t *testing.T) {
	for _, c := range []struct {
		name   string
		wayOut string
	}{
		{subjecttags.FileName, "removing"},
		{meta.ConsumerOffsetFileName, "committed offsets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys, _ := newStore(t, 20)
			file := path.Join(testDir, meta.ConfigDirName, c.name)
			write := func(name, content string) {
				t.Helper()
				if err := fsys.MkdirAll(path.Dir(name)); err != nil {
					t.Fatal(err)
				}
				f, err := fsys.Create(name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write([]byte(content)); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			write(file, `{"topics": [`)
			write(file+meta.BakSuffix, "")
			r := mustVerify(t, fsys)
			p := requireProblem(t, r, KindConfig, c.name, 0)
			if r.Verdict != VerdictCorrupt || !strings.Contains(p.Desc, c.wayOut) || !strings.Contains(p.Desc, "refuse") {
				t.Fatalf("verdict %s, problem %q: want corrupt, the way out (%q)", r.Verdict, p.Desc, c.wayOut)
			}
			if _, err := engine.Open(engineOptions(t, fsys, testDir)); err == nil {
				t.Fatal("the engine opened the store the report calls unusable")
			}
			if rep, err := Repair(context.Background(), options(fsys, testDir)); !errors.Is(err, ErrNotRepairable) ||
				!strings.Contains(err.Error(), c.name) || rep.Cut != nil {
				t.Fatalf("repair: %v", err)
			}
			// A good backup is what the engine reads: no problem.
			write(file+meta.BakSuffix, `{"topics":[],"offsetTable":{}}`)
			requireClean(t, mustVerify(t, fsys))
			// The way out.
			for _, name := range []string{file, file + meta.BakSuffix} {
				if err := fsys.Remove(name); err != nil {
					t.Fatal(err)
				}
			}
			requireClean(t, mustVerify(t, fsys))
			e, err := engine.Open(engineOptions(t, fsys, testDir))
			if err != nil {
				t.Fatalf("after the way out: %v", err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
