package e2e

import (
	"testing"
)

// TestMemoryBudget: docs/CONFIG.md, "Memory": --memory-limit is the process's soft memory limit,
// 256 MiB by default, 0 for none, and GOMEMLIMIT wins when it is set; the start logs the budget
// in force.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		extra   []string
		env     []string
		want    any
		fromEnv bool
	}{
		{"default", nil, nil, float64(256 << 20), false},
		{"flag", []string{"--memory-limit", "300MiB"}, nil, float64(300 << 20), false},
		{"none", []string{"--memory-limit", "0"}, nil, "none", false},
		{"GOMEMLIMIT wins", []string{"--memory-limit", "300MiB"}, []string{"GOMEMLIMIT=200MiB"}, float64(200 << 20), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := startEngineOpts(t, dir, procOpts{args: runArgs(dir, c.extra...), env: c.env})
			l, _, ok := e.findLog(0, "memory budget")
			if !ok {
				t.Fatal("no memory budget logged")
			}
			if l["memory_limit"] != c.want || l["from_gomemlimit"] != c.fromEnv {
				t.Fatalf("logged %v (from GOMEMLIMIT %v), want %v (%v)", l["memory_limit"], l["from_gomemlimit"], c.want, c.fromEnv)
			}
			e.stop()
		})
	}
	if r := runCLI(t, append(runArgs(t.TempDir(), "--memory-limit", "1MiB"), "-t")...); r.code != 2 {
		t.Fatalf("--memory-limit 1MiB: exit %d, want 2\n%s", r.code, r.stderr)
	}
}
