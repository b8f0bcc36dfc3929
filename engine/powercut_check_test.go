package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/verify"
)

// checkPowerCut checks a store recovered after a power cut against the workload w: every record
// of the CommitLog is whole and one that was sent, once; every message in want is there at its
// ack's position; every ConsumeQueue unit names its record and each queue holds exactly the
// records of its queue, gap-free; every record is found by its key through the index.
func checkPowerCut(t *testing.T, e *Engine, w *powerCutWork, want map[string]Result) {
	t.Helper()
	ctx := context.Background()
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	type queueKey struct {
		topic string
		id    int32
	}
	seen := make(map[string]int64)       // MsgID -> where its record is
	perQueue := make(map[queueKey]int64) // records of each queue
	// RequirePropCRC: the engine wrote every record with the whole-record CRC, so a record
	// without it is one torn in its properties.
	_, err := e.log.Each(e.log.MinOffset(), e.log.MaxOffset(), commitlog.Check{RequirePropCRC: true}, func(phys int64, v commitlog.View) error {
		props, err := decodeProperties(v.Properties())
		if err != nil {
			return fmt.Errorf("record at %d: %w", phys, err)
		}
		id := props[commitlog.PropUniqKey]
		m, ok := w.sent[id]
		switch {
		case !ok:
			return fmt.Errorf("record at %d: a phantom, UNIQ_KEY %q was never sent (properties %q)", phys, id, v.Properties())
		case seen[id] != 0:
			return fmt.Errorf("record at %d: %s is stored twice (first at %d)", phys, id, seen[id]-1)
		case string(v.Topic()) != m.Topic || v.QueueID() != m.QueueID || !bytes.Equal(v.Body(), m.Body):
			return fmt.Errorf("record at %d: %s/%d %q is not the %s/%d message %s sent", phys, v.Topic(), v.QueueID(),
				v.Body()[:min(len(v.Body()), 20)], m.Topic, m.QueueID, id)
		case props["KEYS"] != "k-"+id:
			return fmt.Errorf("record at %d: %s has KEYS %q", phys, id, props["KEYS"])
		}
		seen[id] = phys + 1
		perQueue[queueKey{m.Topic, m.QueueID}]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range want {
		if at := seen[id]; at-1 != r.PhysOffset {
			t.Fatalf("%s acked at %d (%s/%d@%d) is not there after recovery (found at %d)", id, r.PhysOffset, r.Topic,
				r.QueueID, r.QueueOffset, at-1)
		}
	}
	for _, cq := range e.cq.Queues() {
		k := queueKey{cq.Topic(), cq.QueueID()}
		if n := cq.MaxOffset() - cq.MinOffset(); n != perQueue[k] {
			t.Fatalf("queue %s/%d holds %d units [%d, %d), the log %d records", k.topic, k.id, n, cq.MinOffset(), cq.MaxOffset(), perQueue[k])
		}
		for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
			u, err := cq.Unit(off)
			if err != nil {
				t.Fatalf("%s/%d@%d: %v", k.topic, k.id, off, err)
			}
			v, release, err := e.log.Read(u.Phys)
			if err != nil {
				t.Fatalf("%s/%d@%d names %d, where no record is: %v", k.topic, k.id, off, u.Phys, err)
			}
			ok := string(v.Topic()) == k.topic && v.QueueID() == k.id && v.QueueOffset() == off && v.TotalSize() == int(u.Size)
			release()
			if !ok {
				t.Fatalf("%s/%d@%d: unit %+v names another record", k.topic, k.id, off, u)
			}
		}
		delete(perQueue, k)
	}
	for k, n := range perQueue {
		t.Fatalf("%d records of %s/%d and no ConsumeQueue", n, k.topic, k.id)
	}
	for id, at := range seen {
		m := w.sent[id]
		for _, key := range []string{id, "k-" + id} {
			found, err := e.Query(ctx, QueryRequest{Topic: m.Topic, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(found, func(r ReadMessage) bool { return r.PhysicalOffset == at-1 }) {
				t.Fatalf("%s at %d is not found by its key %s through the index (%d found)", id, at-1, key, len(found))
			}
		}
	}
}

// decodeProperties is a strict decoder of a record's properties, independent of the engine's:
// every entry is a non-empty name, 0x01, a non-empty value and 0x02, as the engine writes them.
// A record torn inside its properties (cut off and followed by zeros) fails it.
func decodeProperties(p []byte) (map[string]string, error) {
	out := make(map[string]string)
	for len(p) > 0 {
		end := bytes.IndexByte(p, commitlog.PropertySeparator)
		if end < 0 {
			return nil, fmt.Errorf("malformed properties: %q does not end with 0x02", p)
		}
		name, value, ok := bytes.Cut(p[:end], []byte{commitlog.NameValueSeparator})
		if !ok || len(name) == 0 || len(value) == 0 || bytes.IndexByte(value, 0) >= 0 || bytes.IndexByte(name, 0) >= 0 {
			return nil, fmt.Errorf("malformed property %q", p[:end])
		}
		out[string(name)] = string(value)
		p = p[end+1:]
	}
	return out, nil
}

// verifyConsistent runs `engine verify` on the stopped store of opts and fails on any problem.
func verifyConsistent(t *testing.T, opts Options) {
	t.Helper()
	r, err := verify.Verify(context.Background(), verifyOptions(opts))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !r.Consistent() {
		t.Fatalf("verify: %s, %d problems: %+v", r.Verdict, len(r.Problems), r.Problems)
	}
}

// verifyOptions are verify's options for the store of opts.
func verifyOptions(opts Options) verify.Options {
	return verify.Options{FS: opts.FS, Dir: opts.Dir, CommitLogFileSize: opts.CommitLogFileSize,
		ConsumeQueueUnits: opts.ConsumeQueueUnits, IndexSlots: opts.IndexSlots, IndexEntries: opts.IndexEntries}
}
