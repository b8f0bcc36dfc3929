package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyReportsDamagedSubjectTags: a damaged config/subjectTags.json (and backup) makes every
// start and every offline read refuse the store; `engine verify` reports it as damage (exit 1),
// with the way out, instead of calling the store consistent; taking the way out, the store
// verifies, reads and starts again. README.md "Run it as a service", docs/CONFIG.md subject tags.
func TestVerifyReportsDamagedSubjectTags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--topics", "dev.*")
	nc := connect(t, e.url)
	a := stored(t, nc, msg("dev.1", "one"))
	e.stop()
	file := filepath.Join(dir, "config", "subjectTags.json")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the engine wrote no %s: %v", file, err)
	}
	for _, name := range []string{file, file + ".bak"} {
		if err := os.WriteFile(name, []byte(`{"topics":["dev"`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verify := func() result { return runCLI(t, append([]string{"verify", "--store", dir}, sizeArgs...)...) }
	v := verify()
	out := v.stdout + v.stderr
	if v.code != 1 || !strings.Contains(out, "subjectTags.json") || !strings.Contains(out, "removing") {
		t.Fatalf("verify of a store whose subjectTags.json is damaged: exit %d, want 1 naming the file and the way out\n%s", v.code, out)
	}
	if r := runCLI(t, "get", "--store", dir, "--topic", a.Topic, "--queue", itoa(a.QueueID)); r.code == 0 {
		t.Fatalf("an offline read of the damaged store: exit 0; verify's report would be wrong")
	}

	// The way out.
	for _, name := range []string{file, file + ".bak"} {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if v := verify(); v.code != 0 {
		t.Fatalf("verify after removing the file: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	if got := ndjson(t, mustCLI(t, "get", "--store", dir, "--topic", a.Topic, "--queue", itoa(a.QueueID), "--json")); len(got) != 1 {
		t.Fatalf("read after removing the file: %v", got)
	}
	e = e.restart(t)
	e.stop()
}
