package vfs

import (
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
)

// faultCase performs op through a Faulty that fails exactly op, then checks on the Mem beneath
// that the operation did not happen.
type faultCase struct {
	op    Op
	call  func(t *testing.T, f *Faulty) error
	check func(t *testing.T, m *Mem)
}

func faultCases() []faultCase {
	return []faultCase{
		{OpCreateSegment, func(t *testing.T, f *Faulty) error {
			_, err := f.CreateSegment("d/new", 4096, 4096)
			return err
		}, func(t *testing.T, m *Mem) {
			if exists(m, "d/new") {
				t.Error("segment created")
			}
		}},
		{OpOpenSegment, func(t *testing.T, f *Faulty) error {
			_, err := f.OpenSegment("d/seg", 8192, ReadWrite)
			return err
		}, func(t *testing.T, m *Mem) {
			if n := m.dirs["d"].files["seg"]; n.maps != 0 {
				t.Errorf("segment mapped %d times", n.maps)
			}
		}},
		{OpReserve, func(t *testing.T, f *Faulty) error {
			s := must(f.CreateSegment("d/s", 8192, 0))
			defer s.Close()
			err := s.Reserve(4096)
			if s.Reserved() != 0 {
				t.Errorf("Reserved = %d", s.Reserved())
			}
			return err
		}, func(t *testing.T, m *Mem) {
			if u := must(m.DiskUsage("d")); u.Free != u.Total-4096-7 { // d/seg and d/file only
				t.Errorf("space reserved: %+v", u)
			}
		}},
		{OpSegmentSync, func(t *testing.T, f *Faulty) error {
			s := must(f.OpenSegment("d/seg", 8192, ReadWrite))
			defer s.Close()
			copy(s.Data(), "unsynced")
			return s.Sync(0, 8)
		}, func(t *testing.T, m *Mem) {
			if got := must(m.SyncedImage().ReadFile("d/seg")); string(got[:8]) == "unsynced" {
				t.Error("bytes synced")
			}
		}},
		{OpSegmentWrite, func(t *testing.T, f *Faulty) error {
			s := must(f.OpenSegment("d/seg", 8192, ReadWrite))
			defer s.Close()
			noErr(t, s.Reserve(8192))
			return s.WriteAt([]byte("refused"), 0)
		}, func(t *testing.T, m *Mem) {
			s := must(m.OpenSegment("d/seg", 8192, ReadOnly))
			defer s.Close()
			if string(s.Data()[:7]) == "refused" {
				t.Error("bytes written")
			}
		}},
		{OpPrefault, func(t *testing.T, f *Faulty) error {
			s := must(f.CreateSegment("d/s", 8192, 0))
			defer s.Close()
			return s.Prefault(0, 8192) // past Reserved: Mem itself would fail with EINVAL
		}, nil},
		{OpCreate, func(t *testing.T, f *Faulty) error {
			_, err := f.Create("d/file")
			return err
		}, func(t *testing.T, m *Mem) {
			if got := must(m.ReadFile("d/file")); string(got) != "content" {
				t.Errorf("file truncated to %q", got)
			}
		}},
		{OpOpen, func(t *testing.T, f *Faulty) error {
			_, err := f.Open("d/file")
			return err
		}, func(t *testing.T, m *Mem) {
			if n := m.dirs["d"].files["file"]; n.opens != 0 {
				t.Errorf("file opened %d times", n.opens)
			}
		}},
		{OpRead, func(t *testing.T, f *Faulty) error {
			file := must(f.Open("d/file"))
			defer file.Close()
			_, err := file.Read(make([]byte, 3))
			if _, err2 := file.ReadAt(make([]byte, 3), 0); !errors.Is(err2, ErrInjected) {
				t.Errorf("ReadAt: %v", err2)
			}
			if mf := file.(*faultyFile).File.(*memFile); mf.off != 0 {
				t.Errorf("offset moved to %d", mf.off)
			}
			return err
		}, nil},
		{OpWrite, func(t *testing.T, f *Faulty) error {
			file := must(f.Create("d/other"))
			defer file.Close()
			_, err := file.Write([]byte("x"))
			if _, err2 := file.WriteAt([]byte("y"), 0); !errors.Is(err2, ErrInjected) {
				t.Errorf("WriteAt: %v", err2)
			}
			return err
		}, func(t *testing.T, m *Mem) {
			if st := must(m.Stat("d/other")); st.Size != 0 {
				t.Errorf("written: size %d", st.Size)
			}
		}},
		{OpSyncFS, func(t *testing.T, f *Faulty) error {
			writeFile(t, f, "d/unsynced", nil, false)
			s := must(f.OpenSyncer("d"))
			defer s.Close()
			return s.SyncAll(nil)
		}, func(t *testing.T, m *Mem) {
			if exists(m.SyncedImage(), "d/unsynced") {
				t.Error("file system synced")
			}
		}},
		{OpOpenUpdate, func(t *testing.T, f *Faulty) error {
			_, err := f.OpenUpdate("d/file")
			return err
		}, func(t *testing.T, m *Mem) {
			if n := m.dirs["d"].files["file"]; n.opens != 0 {
				t.Errorf("file opened %d times", n.opens)
			}
		}},
		{OpFileSync, func(t *testing.T, f *Faulty) error {
			file := must(f.Create("d/file"))
			defer file.Close()
			must(file.Write([]byte("new")))
			return file.Sync()
		}, func(t *testing.T, m *Mem) {
			if got := must(m.SyncedImage().ReadFile("d/file")); string(got) != "content" {
				t.Errorf("synced image has %q", got)
			}
		}},
		{OpReadFile, func(t *testing.T, f *Faulty) error {
			_, err := f.ReadFile("d/file")
			return err
		}, nil},
		{OpRename, func(t *testing.T, f *Faulty) error {
			return f.Rename("d/file", "d/renamed")
		}, func(t *testing.T, m *Mem) {
			if !exists(m, "d/file") || exists(m, "d/renamed") {
				t.Error("renamed")
			}
		}},
		{OpRemove, func(t *testing.T, f *Faulty) error {
			return f.Remove("d/file")
		}, func(t *testing.T, m *Mem) {
			if !exists(m, "d/file") {
				t.Error("removed")
			}
		}},
		{OpMkdir, func(t *testing.T, f *Faulty) error {
			return f.MkdirAll("d/sub/dir")
		}, func(t *testing.T, m *Mem) {
			if exists(m, "d/sub") {
				t.Error("directory made")
			}
		}},
		{OpReadDir, func(t *testing.T, f *Faulty) error {
			_, err := f.ReadDir("d")
			return err
		}, nil},
		{OpStat, func(t *testing.T, f *Faulty) error {
			_, err := f.Stat("d/file")
			return err
		}, nil},
		{OpSyncDir, func(t *testing.T, f *Faulty) error {
			writeFile(t, f, "d/unsynced", nil, true)
			return f.SyncDir("d")
		}, func(t *testing.T, m *Mem) {
			if exists(m.SyncedImage(), "d/unsynced") {
				t.Error("directory synced")
			}
		}},
		{OpLock, func(t *testing.T, f *Faulty) error {
			_, err := f.Lock("d/lock")
			return err
		}, func(t *testing.T, m *Mem) {
			if exists(m, "d/lock") {
				t.Error("lock file created")
			}
		}},
		{OpDiskUsage, func(t *testing.T, f *Faulty) error {
			_, err := f.DiskUsage("d")
			return err
		}, nil},
	}
}

func TestFaultyInjectedErrorStopsTheOperation(t *testing.T) {
	covered := map[Op]bool{}
	for _, c := range faultCases() {
		covered[c.op] = true
		t.Run(c.op.String(), func(t *testing.T) {
			m := NewMem()
			noErr(t, m.MkdirAll("d"))
			noErr(t, must(m.CreateSegment("d/seg", 8192, 4096)).Close())
			writeFile(t, m, "d/file", []byte("content"), true)
			noErr(t, m.SyncDir("d"))
			if err := c.call(t, NewFaulty(m, OnOp(c.op, ErrInjected))); err != ErrInjected {
				t.Fatalf("got %v, want the injected error itself", err)
			}
			if c.check != nil {
				c.check(t, m)
			}
		})
	}
	for op := OpCreateSegment; op <= OpSyncFS; op++ {
		if !covered[op] {
			t.Errorf("no case for %v", op)
		}
	}
}

// TestFaultyPassesThrough runs a small store life through a Faulty that injects nothing and
// records what it was asked, to pin the names the injector sees.
func TestFaultyPassesThrough(t *testing.T) {
	type call struct {
		op   Op
		name string
	}
	var mu sync.Mutex
	var calls []call
	f := NewFaulty(NewMem(), func(op Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{op, name})
		return nil
	})
	noErr(t, f.MkdirAll("d"))
	s := must(f.CreateSegment("d/seg", 4096, 0))
	noErr(t, s.Reserve(4096))
	noErr(t, s.Prefault(0, 4096))
	copy(s.Data(), "abc")
	noErr(t, s.Sync(0, 3))
	noErr(t, s.Close())
	writeFile(t, f, "d/tmp", []byte("meta"), true)
	noErr(t, f.Rename("d/tmp", "d/meta"))
	noErr(t, f.SyncDir("d"))
	r := must(f.Open("d/meta"))
	if got := must(io.ReadAll(r)); string(got) != "meta" {
		t.Fatalf("read %q", got)
	}
	noErr(t, r.Close())
	want := []call{
		{OpMkdir, "d"}, {OpCreateSegment, "d/seg"}, {OpReserve, "d/seg"}, {OpPrefault, "d/seg"},
		{OpSegmentSync, "d/seg"}, {OpCreate, "d/tmp"}, {OpWrite, "d/tmp"}, {OpFileSync, "d/tmp"},
		{OpRename, "d/tmp"}, {OpSyncDir, "d"}, {OpOpen, "d/meta"},
	}
	if !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("calls %v, want %v then reads", calls, want)
	}
	for _, c := range calls[len(want):] {
		if c != (call{OpRead, "d/meta"}) {
			t.Fatalf("unexpected call %v", c)
		}
	}
}

func TestOnNth(t *testing.T) {
	inj := OnNth(OpSegmentSync, 3, ErrInjected)
	var got []error
	for range 5 {
		_ = inj(OpFileSync, "x") // other ops do not count
		got = append(got, inj(OpSegmentSync, "x"))
	}
	if !slices.Equal(got, []error{nil, nil, ErrInjected, nil, nil}) {
		t.Fatalf("got %v", got)
	}

	inj = OnNth(OpWrite, 50, ErrInjected)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for range 10 {
		wg.Go(func() {
			for range 20 {
				if inj(OpWrite, "x") != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if failures != 1 {
		t.Fatalf("%d failures under concurrency, want 1", failures)
	}
}

func TestToggle(t *testing.T) {
	tg := NewToggle(OnOp(OpSyncDir, ErrInjected))
	f := NewFaulty(NewMem(), tg.Inject)
	noErr(t, f.SyncDir("."))
	tg.On()
	if err := f.SyncDir("."); err != ErrInjected {
		t.Fatalf("on: %v", err)
	}
	noErr(t, f.MkdirAll("d")) // on, but not the op it fails
	tg.Off()
	noErr(t, f.SyncDir("."))

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100 {
			if i%2 == 0 {
				tg.On()
			} else {
				tg.Off()
			}
		}
	})
	for range 100 {
		_ = f.SyncDir(".")
	}
	wg.Wait()
}

// TestFaultyBlockingInjector holds a segment sync inside the injector, as a test of a slow disk
// would, and checks that nothing became durable until it was let go.
func TestFaultyBlockingInjector(t *testing.T) {
	m := NewMem()
	entered, release := make(chan struct{}), make(chan struct{})
	f := NewFaulty(m, func(op Op, _ string) error {
		if op == OpSegmentSync {
			close(entered)
			<-release
		}
		return nil
	})
	s := must(f.CreateSegment("seg", 4096, 4096))
	noErr(t, f.SyncDir("."))
	copy(s.Data(), "payload")
	done := make(chan error)
	go func() { done <- s.Sync(0, 7) }()
	<-entered
	if got := must(m.SyncedImage().ReadFile("seg")); string(got[:7]) == "payload" {
		t.Fatal("synced while the injector held the call")
	}
	close(release)
	noErr(t, <-done)
	if got := must(m.SyncedImage().ReadFile("seg")); string(got[:7]) != "payload" {
		t.Fatalf("not synced after release: %q", got[:7])
	}
	noErr(t, s.Close())
}
