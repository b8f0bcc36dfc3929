package engine

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appender "github.com/rocketstore/engine/append"
)

// TestQueueAtMaxOffset: a queue started at its ConsumeQueue's last offsets (StartQueue is the
// seam, as a partition taken over there) stores them and refuses the message after the last with
// ErrQueueFull while the engine goes on (stored, that message stopped dispatch, and recovery
// stopped at it on every start); a start past the end of a full queue is refused; a restart
// keeps everything.
func TestQueueAtMaxOffset(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testOptions(t, dir))
	ctx := context.Background()
	last := e.cq.MaxQueueOffset()
	put := func(e *Engine, q int32) Result {
		t.Helper()
		rs, err := e.Put(ctx, Message{Topic: "t", QueueID: q, Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return rs[0]
	}
	if err := e.StartQueue(ctx, "t", 0, last+2); err == nil {
		t.Fatalf("a queue started at %d, past the end of a full queue", last+2)
	}
	if err := e.StartQueue(ctx, "t", 0, last-1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{last - 1, last} {
		if r := put(e, 0); r.Err != nil || r.QueueOffset != want {
			t.Fatalf("put: offset %d, %v; want %d", r.QueueOffset, r.Err, want)
		}
	}
	if r := put(e, 0); !errors.Is(r.Err, appender.ErrQueueFull) {
		t.Fatalf("put past the last offset: %+v", r)
	}
	if r := put(e, 1); r.Err != nil || r.QueueOffset != 0 {
		t.Fatalf("another queue after the refusal: %+v", r)
	}
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = mustOpen(t, testOptions(t, dir))
	if r := put(e, 0); !errors.Is(r.Err, appender.ErrQueueFull) {
		t.Fatalf("put past the last offset after a restart: %+v", r)
	}
	got, err := e.Get(ctx, GetRequest{Topic: "t", QueueID: 0, Offset: last - 1, Max: 10, MaxBytes: 1 << 20})
	if err != nil || len(got.Messages) != 2 || got.Messages[1].QueueOffset != last || got.MaxOffset != last+1 {
		t.Fatalf("read the last offsets: %+v, %v", got, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOptionsPast32Bits: sizes that end up in 32-bit fields are refused past them, and Open
// creates nothing; cut to 32 bits they wrapped (index sizes of 2^32 became 0, the default
// geometry, silently; a 2 GiB segment is one RocketMQ's int positions cannot address). At the
// limit itself the options pass the check.
func TestOptionsPast32Bits(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"CommitLogFileSize", func(o *Options) { o.CommitLogFileSize = math.MaxInt32 + 1 }},
		{"CommitLogFileSize", func(o *Options) { o.CommitLogFileSize = -1 }},
		{"IndexSlots", func(o *Options) { o.IndexSlots, o.IndexEntries = 1<<32, 1<<32 }},
		{"IndexEntries", func(o *Options) { o.IndexEntries = 1<<32 + 20_000_000 }},
		{"MaxBodySize", func(o *Options) { o.MaxBodySize = math.MaxInt32 - payloadHeadroom + 1 }},
	} {
		dir := filepath.Join(t.TempDir(), "store")
		o := testOptions(t, dir)
		tc.set(&o)
		if e, err := Open(o); err == nil || !strings.Contains(err.Error(), tc.name) {
			if e != nil {
				e.Close()
			}
			t.Errorf("%s: %v, want refused", tc.name, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the store directory was created (%v)", tc.name, err)
		}
	}
	o := Options{CommitLogFileSize: math.MaxInt32, IndexSlots: math.MaxInt32, IndexEntries: math.MaxInt32,
		MaxBodySize: math.MaxInt32 - payloadHeadroom}
	if err := o.check(); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
}

// TestOpenRefusesBadDeleteWhen: the settings are checked before anything is opened.
func TestOpenRefusesBadDeleteWhen(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.DeleteWhen = "25"
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "DeleteWhen") {
		t.Fatalf("open with DeleteWhen 25: %v", err)
	}
}

func TestRetentionDefaults(t *testing.T) {
	o := Options{Dir: "x"}.withDefaults()
	if o.FileReservedTime != 72*time.Hour || o.DeleteWhen != "04" || o.CleanInterval != 10*time.Second ||
		o.CleanFirstDelay != time.Minute || o.DiskMaxUsedRatio != 0.75 || o.DiskCleanForciblyRatio != 0.85 ||
		o.DiskWarningRatio != 0.90 || o.DeleteFilesPerPass != 10 {
		t.Fatalf("%+v", o)
	}
	o = Options{Dir: "x", DiskWarningRatio: 0.99, DiskCleanForciblyRatio: 0.1, DiskMaxUsedRatio: 0.05}.withDefaults()
	if o.DiskWarningRatio != 0.90 || o.DiskCleanForciblyRatio != 0.30 || o.DiskMaxUsedRatio != 0.10 {
		t.Fatalf("not clamped: %v %v %v", o.DiskWarningRatio, o.DiskCleanForciblyRatio, o.DiskMaxUsedRatio)
	}
}
