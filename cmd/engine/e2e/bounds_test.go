package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestWideSubjectSpaceBoundsMapsAndFiles: however many distinct subjects arrive, the engine's
// process maps and holds open at most (max_topics + 1) x queues ConsumeQueue files (while each
// queue holds fewer units than a file), and a second wave of new subjects adds no mapping and
// no open file. docs/CONFIG.md, "Wide subject spaces": the bound on files, vm.max_map_count and
// the open-files limit.
func TestWideSubjectSpaceBoundsMapsAndFiles(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("needs /proc")
	}
	const maxTopics, queues, wave = 8, 4, 600 // wave/queues stays under --cq-units (1000)
	dir := t.TempDir()
	e := startEngine(t, dir, "--max-topics", fmt.Sprint(maxTopics), "--queues", fmt.Sprint(queues))
	nc := connect(t, e.url)
	pid := e.cmd.Process.Pid
	cqDir, err := filepath.EvalSymlinks(filepath.Join(dir, "consumequeue"))
	if err != nil {
		t.Fatal(err)
	}
	publishWave := func(first int) {
		t.Helper()
		for i := first; i < first+wave; i++ {
			if err := nc.Publish(fmt.Sprintf("sensor.%d.temp", i), []byte("t")); err != nil {
				t.Fatal(err)
			}
		}
		// Dispatch is in log order: once this one is readable, every wave message is in its queue.
		// A subject of its own, so past the limit: it goes to _overflow, whose queues exist.
		last := fmt.Sprintf("sensor.%d.last", first)
		if a := stored(t, nc, &nats.Msg{Subject: last, Data: []byte("last")}); a.Topic != "_overflow" {
			t.Fatalf("%s went to topic %s, want _overflow", last, a.Topic)
		} else {
			waitReadable(t, nc, a)
		}
	}

	publishWave(0)
	maps1, mappedCQ1 := processMaps(t, pid, cqDir)
	fds1, openCQ1 := processFDs(t, pid, cqDir)
	bound := (maxTopics + 1) * queues
	if mappedCQ1 > bound || openCQ1 > bound {
		t.Errorf("after %d subjects: %d ConsumeQueue files mapped, %d open; want at most %d ((max_topics + 1) x queues)",
			wave, mappedCQ1, openCQ1, bound)
	}

	publishWave(wave) // all new subjects: past the limit, every one goes to _overflow
	maps2, mappedCQ2 := processMaps(t, pid, cqDir)
	fds2, openCQ2 := processFDs(t, pid, cqDir)
	if mappedCQ2 != mappedCQ1 || openCQ2 != openCQ1 {
		t.Errorf("%d more new subjects: ConsumeQueue files mapped %d -> %d, open %d -> %d; want no change",
			wave, mappedCQ1, mappedCQ2, openCQ1, openCQ2)
	}
	// The Go runtime may map a few more arenas as the heap grows; a file per subject would be
	// hundreds.
	if maps2 > maps1+32 || fds2 > fds1+4 {
		t.Errorf("%d more new subjects: the process's mappings %d -> %d, open files %d -> %d", wave, maps1, maps2, fds1, fds2)
	}
	e.stop()
}

// processMaps returns the number of pid's memory mappings and how many distinct files under
// under it maps.
func processMaps(t *testing.T, pid int, under string) (total, files int) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		total++
		// address perms offset dev inode path: the path is the sixth field, when there is one.
		if fields := strings.Fields(sc.Text()); len(fields) >= 6 && strings.HasPrefix(fields[5], under+"/") {
			seen[fields[5]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total, len(seen)
}

// processFDs returns the number of pid's open files and how many of them are under under.
func processFDs(t *testing.T, pid int, under string) (total, files int) {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		total++
		if target, err := os.Readlink(filepath.Join(fdDir, en.Name())); err == nil && strings.HasPrefix(target, under+"/") {
			files++
		}
	}
	return total, files
}
