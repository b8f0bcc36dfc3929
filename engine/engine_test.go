package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

func testOptions(t testing.TB, dir string) Options {
	return Options{
		Dir:               dir,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		CommitLogFileSize: 1 << 20,
		ConsumeQueueUnits: 1000,
		IndexSlots:        1024,
		IndexEntries:      4096,
	}
}

func mustOpen(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func body(topic string, queue int32, n int) []byte {
	return fmt.Appendf(nil, "%s/%d/%06d|%s", topic, queue, n, bytes.Repeat([]byte{'x'}, n%300))
}

// putMany stores n messages over topics x 4 queues in batches and returns the results by
// (topic, queue) in order.
func putMany(t testing.TB, e *Engine, topics, n, first int) map[string][]Result {
	t.Helper()
	out := make(map[string][]Result)
	for i := 0; i < n; {
		var msgs []Message
		for j := 0; j < 50 && i < n; j, i = j+1, i+1 {
			k := first + i
			topic := fmt.Sprintf("topic-%d", k%topics)
			q := int32(k / topics % 4)
			msgs = append(msgs, Message{
				Topic: topic, QueueID: q, Body: body(topic, q, k), Tags: fmt.Sprintf("tag%d", k%5),
				Keys: []string{fmt.Sprintf("key-%d", k)}, MsgID: fmt.Sprintf("id-%d", k),
			})
		}
		res, err := e.Put(context.Background(), msgs...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			key := fmt.Sprintf("%s/%d", r.Topic, r.QueueID)
			out[key] = append(out[key], r)
		}
	}
	return out
}

// checkQueues reads every acked message back through its ConsumeQueue unit and CommitLog record.
func checkQueues(t testing.TB, e *Engine, acked map[string][]Result) {
	t.Helper()
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	for key, rs := range acked {
		for _, r := range rs {
			cq := e.cq.Find(r.Topic, r.QueueID)
			if cq == nil {
				t.Fatalf("%s: no consumequeue", key)
			}
			u, err := cq.Unit(r.QueueOffset)
			if err != nil {
				t.Fatalf("%s@%d: %v", key, r.QueueOffset, err)
			}
			if u.Phys != r.PhysOffset || u.Size != r.Size {
				t.Fatalf("%s@%d: unit %+v, ack said phys %d size %d", key, r.QueueOffset, u, r.PhysOffset, r.Size)
			}
			v, release, err := e.log.Read(u.Phys)
			if err != nil {
				t.Fatal(err)
			}
			if string(v.Topic()) != r.Topic || v.QueueID() != r.QueueID || v.QueueOffset() != r.QueueOffset {
				t.Fatalf("%s@%d: record is %s/%d@%d", key, r.QueueOffset, v.Topic(), v.QueueID(), v.QueueOffset())
			}
			release()
		}
	}
}

func TestPutCloseReopenContinues(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(t, filepath.Join(dir, mode.String()))
			opts.FlushMode = mode
			e := mustOpen(t, opts)
			acked := putMany(t, e, 7, 3000, 0)
			checkQueues(t, e, acked)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if ok, _ := meta.AbortExists(vfs.Default, opts.Dir); ok {
				t.Fatal("abort file left after a clean close")
			}

			e = mustOpen(t, opts)
			defer e.Close()
			rec := e.Recovery()
			if !rec.CleanExit || !rec.FromCheckpoint || rec.Records != 0 {
				t.Fatalf("restart after a clean close rescanned: %+v", rec)
			}
			checkQueues(t, e, acked)
			more := putMany(t, e, 7, 500, 3000)
			for key, rs := range more {
				prev := acked[key]
				if rs[0].QueueOffset != prev[len(prev)-1].QueueOffset+1 {
					t.Fatalf("%s: offsets restart at %d after %d", key, rs[0].QueueOffset, prev[len(prev)-1].QueueOffset)
				}
			}
			checkQueues(t, e, more)
		})
	}
}

func TestDuplicatesStoredOnce(t *testing.T) {
	e := mustOpen(t, testOptions(t, t.TempDir()))
	defer e.Close()
	m := Message{Topic: "t", QueueID: 1, Body: []byte("once"), MsgID: "abc"}
	res, err := e.Put(context.Background(), m, m)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].PhysOffset != res[0].PhysOffset || res[1].QueueOffset != res[0].QueueOffset {
		t.Fatalf("results %+v", res)
	}
	res2, err := e.Put(context.Background(), m)
	if err != nil || !res2[0].Duplicate || res2[0].MsgID != res[0].MsgID {
		t.Fatalf("later duplicate: %+v, %v", res2, err)
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	if got := e.cq.Find("t", 1).MaxOffset(); got != 1 {
		t.Fatalf("queue holds %d messages", got)
	}
}

func TestBadInputStoresNothing(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	opts.MaxBodySize = 1000
	e := mustOpen(t, opts)
	defer e.Close()
	res, err := e.Put(context.Background(),
		Message{Topic: "ok", Body: make([]byte, 1001)},
		Message{Topic: "../escape", Body: []byte("x")},
		Message{Topic: "ok", Body: []byte("x"), Properties: map[string]string{"bad": "a\x01b"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	wants := []error{commitlog.ErrBodyTooLarge, commitlog.ErrInvalidTopic, commitlog.ErrInvalidProperty}
	for i, r := range res {
		if !errors.Is(r.Err, wants[i]) {
			t.Errorf("message %d: %v, want %v", i, r.Err, wants[i])
		}
	}
	if e.log.MaxOffset() != 0 {
		t.Fatalf("log grew to %d", e.log.MaxOffset())
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	e := mustOpen(t, opts)
	defer e.Close()
	if _, err := Open(opts); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// TestMmapWritesInterchangeable: a store written with records copied into the mapping
// (MmapWrites) and reopened with the default pwrite writer, then back, holds every message of
// both runs: the two writers leave the same format, so a store can switch between them.
func TestMmapWritesInterchangeable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	opts := testOptions(t, dir)
	acked := map[string][]Result{}
	for run, mmap := range []bool{true, false, true} {
		opts.MmapWrites = mmap
		e := mustOpen(t, opts)
		checkQueues(t, e, acked)
		for k, rs := range putMany(t, e, 3, 3000, run*3000) {
			acked[k] = append(acked[k], rs...)
		}
		checkQueues(t, e, acked)
		if run == 2 && e.Offsets().Written < 2*opts.CommitLogFileSize {
			t.Fatalf("the runs wrote %d bytes: not across segments of %d", e.Offsets().Written, opts.CommitLogFileSize)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
