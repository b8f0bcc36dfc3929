package reader

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

const offsetsFile = "/store/config/consumerOffset.json"

func TestConsumerOffsetsSurviveReopen(t *testing.T) {
	fsys := vfs.NewMem()
	noErr(t, fsys.MkdirAll("/store"))
	c, err := OpenConsumerOffsets(fsys, "/store")
	noErr(t, err)
	if _, ok := c.Fetch("g", "T", 0); ok {
		t.Fatal("an offset in a new table")
	}
	noErr(t, c.Persist()) // nothing committed: nothing written
	if _, err := fsys.Stat(offsetsFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Persist of an empty table wrote a file: %v", err)
	}
	noErr(t, c.Commit("g", "T", 0, 42))
	noErr(t, c.Commit("g", "T", 3, 7))
	noErr(t, c.Commit("other-group", "T", 0, 1))
	noErr(t, c.Commit("g", "%RETRY%g", 0, 5))
	noErr(t, c.Commit("g", "T", 0, 43)) // replaces 42
	if off, ok := c.Fetch("g", "T", 0); !ok || off != 43 {
		t.Fatalf("fetch %d %v", off, ok)
	}
	noErr(t, c.Persist())

	raw, err := fsys.ReadFile(offsetsFile)
	noErr(t, err)
	var file struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	noErr(t, json.Unmarshal(raw, &file))
	if fmt.Sprint(file.OffsetTable) != "map[%RETRY%g@g:map[0:5] T@g:map[0:43 3:7] T@other-group:map[0:1]]" {
		t.Fatalf("file %s", raw)
	}

	c2, err := OpenConsumerOffsets(fsys, "/store")
	noErr(t, err)
	for _, w := range []struct {
		group, topic string
		queue        int32
		off          int64
	}{{"g", "T", 0, 43}, {"g", "T", 3, 7}, {"other-group", "T", 0, 1}, {"g", "%RETRY%g", 0, 5}} {
		if off, ok := c2.Fetch(w.group, w.topic, w.queue); !ok || off != w.off {
			t.Fatalf("after reopen %s %s/%d: %d %v, want %d", w.group, w.topic, w.queue, off, ok, w.off)
		}
	}

	// A second save keeps the first as the backup; an unchanged table is not written again.
	noErr(t, c2.Commit("g", "T", 0, 50))
	noErr(t, c2.Persist())
	bak, err := fsys.ReadFile(offsetsFile + meta.BakSuffix)
	noErr(t, err)
	if string(bak) != string(raw) {
		t.Fatalf("backup %s, want the previous file", bak)
	}
	noErr(t, fsys.Remove(offsetsFile))
	noErr(t, c2.Persist())
	if _, err := fsys.Stat(offsetsFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("an unchanged table was written again")
	}
	// The main file gone, the backup is loaded.
	c3, err := OpenConsumerOffsets(fsys, "/store")
	noErr(t, err)
	if off, _ := c3.Fetch("g", "T", 0); off != 43 {
		t.Fatalf("from the backup: %d", off)
	}

	// A damaged file with a damaged backup is an error, not an empty table.
	f, err := fsys.Create(offsetsFile)
	noErr(t, err)
	_, err = f.Write([]byte("{not json"))
	noErr(t, err)
	noErr(t, f.Close())
	f, err = fsys.Create(offsetsFile + meta.BakSuffix)
	noErr(t, err)
	noErr(t, f.Close())
	if _, err := OpenConsumerOffsets(fsys, "/store"); !errors.Is(err, meta.ErrCorrupt) {
		t.Fatalf("damaged: %v", err)
	}
}

func TestConsumerOffsetsValidate(t *testing.T) {
	c, err := OpenConsumerOffsets(vfs.NewMem(), "/store")
	noErr(t, err)
	for _, g := range []string{"", "a@b", "tab\there", "nl\n", "\xff\xfe", strings.Repeat("g", MaxGroupLen+1), "bell\a"} {
		if err := c.Commit(g, "T", 0, 1); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("group %q: %v, want ErrInvalidGroup", g, err)
		}
	}
	for _, g := range []string{"g", "GID_orders-1", "with space", "grüße", "%DLQ%x", strings.Repeat("g", MaxGroupLen)} {
		noErr(t, c.Commit(g, "T", 0, 1))
	}
	for name, err := range map[string]error{
		"bad topic":       c.Commit("g", "a/b", 0, 1),
		"topic with @":    c.Commit("g", "a@b", 0, 1),
		"negative queue":  c.Commit("g", "T", -1, 1),
		"negative offset": c.Commit("g", "T", 0, -1),
	} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}

// TestConsumerOffsetsConcurrent commits from many goroutines while others persist; the last
// Persist has every commit.
func TestConsumerOffsetsConcurrent(t *testing.T) {
	fsys := vfs.NewMem()
	c, err := OpenConsumerOffsets(fsys, "/store")
	noErr(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if err := c.Commit(fmt.Sprintf("g%d", g), "T", int32(i%4), int64(i)); err != nil {
					t.Error(err)
				}
				if i%50 == 0 {
					if err := c.Persist(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	noErr(t, c.Persist())
	c2, err := OpenConsumerOffsets(fsys, "/store")
	noErr(t, err)
	for g := range 4 {
		for q := range int32(4) {
			if off, ok := c2.Fetch(fmt.Sprintf("g%d", g), "T", q); !ok || off != int64(196+q) {
				t.Fatalf("g%d T/%d: %d %v, want %d", g, q, off, ok, 196+q)
			}
		}
	}
}
