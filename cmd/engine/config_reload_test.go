package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
)

// fakeTarget records what a reload applies.
type fakeTarget struct {
	mu        sync.Mutex
	level     *zerolog.Level
	retention *engine.Retention
}

func (f *fakeTarget) SetLogLevel(l zerolog.Level) { f.mu.Lock(); f.level = &l; f.mu.Unlock() }
func (f *fakeTarget) SetRetention(r engine.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	f.retention = &r
	f.mu.Unlock()
	return nil
}

// TestReloadApplies: a reload reads the file again and applies the log level and the retention
// settings, refuses the rest (needs a restart), lets flags and variables still win, and changes
// nothing when the new configuration is invalid.
func TestReloadApplies(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "engine.conf")
	writeConf(t, file, "store: "+dir+"\nlog_level: info\nfile_reserved_time: \"72h\"\nqueues: 4\n")
	t.Setenv("ENGINE_DISK_WARNING_RATIO", "0.80")
	r := mustParse(t, "run", "-c", file, "--delete-files-per-pass", "3")
	var logs bytes.Buffer
	log := zerolog.New(&logs)

	// Nothing changed: nothing applied.
	tgt := &fakeTarget{}
	if applied, refused := r.reloadInto(tgt, log); len(applied)+len(refused) != 0 || tgt.retention != nil || tgt.level != nil {
		t.Fatalf("unchanged file: applied %v, refused %v", applied, refused)
	}

	writeConf(t, file, "store: "+dir+`
log_level: debug
file_reserved_time: "48h"
delete_when: "03;15"
disk_max_used_ratio: 0.7
disk_warning_ratio: 0.85     # the environment still wins
delete_files_per_pass: 5     # the flag still wins
queues: 8                    # needs a restart
no_index: true               # needs a restart
`)
	applied, refused := r.reloadInto(tgt, log)
	if want := []string{"log_level", "file_reserved_time", "delete_when", "disk_max_used_ratio"}; !reflect.DeepEqual(applied, want) {
		t.Errorf("applied %v, want %v", applied, want)
	}
	if want := []string{"no_index", "queues"}; !reflect.DeepEqual(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	want := engine.Retention{FileReservedTime: 48 * time.Hour, DeleteWhen: "03;15", CleanInterval: 10 * time.Second,
		DiskMaxUsedRatio: 0.7, DiskCleanForciblyRatio: 0.85, DiskWarningRatio: 0.80, DeleteFilesPerPass: 3}
	if tgt.retention == nil || *tgt.retention != want {
		t.Errorf("retention %+v, want %+v", tgt.retention, want)
	}
	if tgt.level == nil || *tgt.level != zerolog.DebugLevel {
		t.Errorf("level %v, want debug", tgt.level)
	}
	for _, line := range []string{`"key":"queues","running":"4","new":"8"`, `reload: not applied, this setting needs a restart`,
		`"key":"file_reserved_time","from":"72h0m0s","to":"48h0m0s"`, `"message":"config reloaded"`} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %s:\n%s", line, logs.String())
		}
	}

	// Again: the applied keys run with their new values now; the refused ones are still told.
	tgt = &fakeTarget{}
	applied, refused = r.reloadInto(tgt, log)
	if len(applied) != 0 || len(refused) != 2 || tgt.retention != nil {
		t.Errorf("second reload: applied %v, refused %v, retention %+v", applied, refused, tgt.retention)
	}

	// An invalid file changes nothing.
	writeConf(t, file, "store: "+dir+"\nlog_level: trace\ndelete_when: \"25\"\n")
	logs.Reset()
	if applied, _ := r.reloadInto(tgt, log); len(applied) != 0 || tgt.retention != nil || tgt.level != nil ||
		!strings.Contains(logs.String(), "reload refused: the configuration is invalid") {
		t.Errorf("invalid file: applied %v\n%s", applied, logs.String())
	}
	writeConf(t, file, "store: "+dir+"\nlog_levle: trace\n")
	logs.Reset()
	if applied, _ := r.reloadInto(tgt, log); len(applied) != 0 || !strings.Contains(logs.String(), `unknown key`) {
		t.Errorf("unknown key: applied %v\n%s", applied, logs.String())
	}
}
