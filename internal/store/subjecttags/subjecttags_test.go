package subjecttags

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestAdoptTakesOnlyTopicsNewToTheStore: a declared topic the store does not have joins the
// set, durably (a crash image keeping only synced bytes has it); one the store already has is
// left out and logged; a topic once in the set stays, also when no longer declared.
func TestAdoptTakesOnlyTopicsNewToTheStore(t *testing.T) {
	fsys := vfs.NewMem()
	const dir = "/store"
	s, err := Load(fsys, dir)
	if err != nil || s.Len() != 0 {
		t.Fatalf("Load of a store without the file: %d topics, %v; want an empty set", s.Len(), err)
	}
	var logged bytes.Buffer
	log := zerolog.New(&logged)
	s, err = Adopt(fsys, dir, s, []string{"device", "orders", "device"}, []string{"orders", "other"}, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Topics(); !slices.Equal(got, []string{"device"}) {
		t.Fatalf("set %q, want [device]: orders was in the store before it was declared", got)
	}
	if !strings.Contains(logged.String(), `"topics":["orders"]`) {
		t.Fatalf("the topic left out was not logged: %s", logged.String())
	}

	img := fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})
	back, err := Load(img, dir)
	if err != nil || !back.Has("device") || back.Len() != 1 {
		t.Fatalf("after a crash: %q, %v; want [device] durable once Adopt returned", back.Topics(), err)
	}

	// The next start: device is in the store now, and no longer declared; a new one is.
	s, err = Adopt(fsys, dir, back, []string{"sensors"}, []string{"device", "orders", "other"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Topics(); !slices.Equal(got, []string{"device", "sensors"}) {
		t.Fatalf("set %q, want [device sensors]", got)
	}
	if again, err := Load(fsys, dir); err != nil || !slices.Equal(again.Topics(), s.Topics()) {
		t.Fatalf("Load after the second Adopt: %q, %v", again.Topics(), err)
	}
}

// TestAdoptNoSpace: on a disk with no space for the file, Adopt returns the new set with the
// error, for the caller to apply and Save later; any other error returns the set as it was.
func TestAdoptNoSpace(t *testing.T) {
	fail := error(syscall.ENOSPC)
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpCreate {
			return fail
		}
		return nil
	})
	s, err := Adopt(fsys, "/store", nil, []string{"device"}, nil, zerolog.Nop())
	if !errors.Is(err, syscall.ENOSPC) || !s.Has("device") {
		t.Fatalf("%q, %v; want [device] and ENOSPC", s.Topics(), err)
	}
	if back, err := Load(fsys, "/store"); err != nil || back.Len() != 0 {
		t.Fatalf("saved anyway: %q, %v", back.Topics(), err)
	}
	fail = errors.New("EIO")
	if s2, err := Adopt(fsys, "/store", nil, []string{"device"}, nil, zerolog.Nop()); err == nil || s2.Len() != 0 {
		t.Fatalf("%q, %v; want the old set and the error", s2.Topics(), err)
	}
	fail = nil
	if err := Save(fsys, "/store", s); err != nil {
		t.Fatal(err)
	}
	if back, err := Load(fsys, "/store"); err != nil || !back.Has("device") {
		t.Fatalf("after Save: %q, %v", back.Topics(), err)
	}
}

// TestAdoptWithNothingNewWritesNothing: no file appears when no declared topic is new.
func TestAdoptWithNothingNewWritesNothing(t *testing.T) {
	fsys := vfs.NewMem()
	s, err := Adopt(fsys, "/store", nil, []string{"orders"}, []string{"orders"}, zerolog.Nop())
	if err != nil || s.Len() != 0 {
		t.Fatalf("%q, %v", s.Topics(), err)
	}
	if _, err := fsys.Stat(filepath.Join("/store", meta.ConfigDirName, FileName)); err == nil {
		t.Fatal("a file was written for an empty set")
	}
}

// TestLoadRefusesADamagedFile: a file that does not decode (and no backup) is an error, not an
// empty set, which would stop the rule's checks on the write path.
func TestLoadRefusesADamagedFile(t *testing.T) {
	fsys := vfs.NewMem()
	name := filepath.Join("/store", meta.ConfigDirName, FileName)
	if err := fsys.MkdirAll(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	if err := meta.WriteFileAtomic(fsys, name, []byte(`{"topics":["dev`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(fsys, "/store"); !errors.Is(err, meta.ErrCorrupt) {
		t.Fatalf("Load of a damaged file: %v, want ErrCorrupt", err)
	}
}

func TestTagsOf(t *testing.T) {
	s := &Set{topics: map[string]struct{}{"device": {}}}
	for _, c := range []struct {
		topic, tags, subject, want string
		err                        bool
	}{
		{"device", "", "device.7.temp", "device.7.temp", false},
		{"device", "device.7.temp", "device.7.temp", "device.7.temp", false},
		{"device", "hot", "device.7.temp", "", true},
		{"device", "", "", "", false},
		{"other", "hot", "device.7.temp", "hot", false},
	} {
		got, err := s.TagsOf(c.topic, c.tags, c.subject)
		if got != c.want || (err != nil) != c.err || err != nil && !errors.Is(err, ErrTagsNotSubject) {
			t.Errorf("TagsOf(%q, %q, %q) = %q, %v; want %q, error %v", c.topic, c.tags, c.subject, got, err, c.want, c.err)
		}
	}
	var none *Set
	if got, err := none.TagsOf("device", "hot", "x"); got != "hot" || err != nil {
		t.Errorf("nil set: %q, %v", got, err)
	}
}

// TestSkip: a unit is skipped only when its code is another subject's; no TAGS (0) may be any.
func TestSkip(t *testing.T) {
	want := Code("device.7.temp")
	if want != javahash.TagsCode("device.7.temp") {
		t.Fatal("Code is not the ConsumeQueue's tags code of the subject")
	}
	if Skip(want, want) || Skip(0, want) || !Skip(Code("device.8.temp"), want) {
		t.Fatal("Skip: want false for the subject's code and for 0, true for another subject's")
	}
}

// FuzzLoad: whatever config/subjectTags.json holds, Load returns a set or an error, never
// panics; a set it returns saves and loads back as the same set.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{`{"topics":["device","orders"]}`, `{"topics":[]}`, `{}`, `{"topics":null}`,
		`{"topics":["a","a"]}`, `{"topics":[1]}`, `[]`, ``, `{"topics":["dev`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMem()
		name := filepath.Join("/store", meta.ConfigDirName, FileName)
		if err := fsys.MkdirAll(filepath.Dir(name)); err != nil {
			t.Fatal(err)
		}
		if err := meta.WriteFileAtomic(fsys, name, data); err != nil {
			t.Fatal(err)
		}
		s, err := Load(fsys, "/store")
		if err != nil {
			return
		}
		// Adopt of a topic outside the set saves the set with it; it must load back.
		s2, err := Adopt(fsys, "/store", s, []string{"zz-new"}, nil, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		back, err := Load(fsys, "/store")
		if err != nil || !slices.Equal(back.Topics(), s2.Topics()) {
			t.Fatalf("saved %q, loaded %q, %v", s2.Topics(), back.Topics(), err)
		}
	})
}
