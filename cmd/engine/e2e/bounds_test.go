package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
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

// TestCommitLogCacheWindow: with --commit-log-cache, the CommitLog's pages more than the window
// behind the head leave the page cache while the engine runs, and the messages there still read
// back. docs/CONFIG.md, commit_log_cache. Residency is read with mincore on a mapping of the
// segment in this process, which sees the same page cache.
func TestCommitLogCacheWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--commit-log-cache", "2MiB", "--log-level", "debug")
	nc := connect(t, e.url)
	body := make([]byte, 64<<10)
	var first, last ack
	for i := range 320 { // 20 MiB: past the 2 MiB window and a 16 MiB step, over 4 MiB segments
		last = stored(t, nc, &nats.Msg{Subject: "cache.t", Data: body})
		if i == 0 {
			first = last
		}
	}
	waitReadable(t, nc, last)
	line := e.waitLog("commitlog cache dropped")
	if upTo, _ := line["up_to"].(float64); upTo < 4<<20 {
		t.Fatalf("dropped up to %v, want past the first 4 MiB segment", upTo)
	}
	seg := filepath.Join(dir, "commitlog", "00000000000000000000")
	f, err := os.Open(seg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, len(data)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	cached := 0
	for _, v := range vec {
		cached += int(v & 1)
	}
	if cached != 0 {
		t.Errorf("%d of %d pages of the first segment still cached after the drop", cached, len(vec))
	}
	waitReadable(t, nc, first) // the oldest message still reads back, from the disk
	e.stop()
}
