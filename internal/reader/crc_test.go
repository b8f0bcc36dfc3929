package reader

import (
	"errors"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestReadsCheckCRC: a record with a flipped bit is served by no read: Get answers ErrChecksum
// (also ErrCorrupt) with the messages before it and NextOffset at it, and reads on past it from
// the next offset; the batched read (Records), Lookup and Query refuse it; an offline Reader too;
// each refusal is counted.
// A filter that skips the record does not touch it.
func TestReadsCheckCRC(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", small)
	var phys []int64
	for i := range 4 {
		phys = append(phys, s.put(msg{body: body(i), keys: "k", tags: "a"}))
	}
	v, err := commitlog.Parse(s.log.Queue().Files()[0].Data()[phys[2]:])
	noErr(t, err)
	bodyAt := phys[2] + int64(v.TotalSize()-len(v.Properties())-2-len(v.Topic())-1-len(v.Body()))
	data := s.log.Queue().Files()[0].Data()
	data[bodyAt] ^= 0x01 // "message 2" -> "lessage 2": the structure holds, the CRC does not

	res, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 0})
	if !errors.Is(err, ErrChecksum) || !errors.Is(err, ErrCorrupt) || !errors.Is(err, commitlog.ErrCorrupt) {
		t.Fatalf("get over the damaged record: %v", err)
	}
	if len(res.Messages) != 2 || res.NextOffset != 2 {
		t.Fatalf("the records before the damage: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	for _, want := range []string{"T/0", "queue offset 2", "from offset 3", "whole-record CRC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	res, err = s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 3})
	if err != nil || len(res.Messages) != 1 || string(res.Messages[0].Body) != "message 3" {
		t.Fatalf("past the damage: %v, %d messages", err, len(res.Messages))
	}
	// A filter that skips the record reads past it.
	if res, err = s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 0, Tags: []string{"b"}}); err != nil || res.NextOffset != 4 {
		t.Fatalf("filtered out: %v, next %d", err, res.NextOffset)
	}
	if _, err := s.r.Lookup(commitlog.OffsetMsgID(storeHost, phys[2])); !errors.Is(err, ErrChecksum) {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := s.r.Query(t.Context(), QueryRequest{Topic: "T", Key: "k"}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("query: %v", err)
	}
	out, _, err := s.r.Records(t.Context(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{QueueID: 0, Offset: 0}}}, nil)
	if !errors.Is(err, ErrChecksum) || out[0].Count != 2 || out[0].NextOffset != 2 {
		t.Fatalf("batched read: %v, %+v", err, out)
	}
	if _, err := s.r.SearchKey(t.Context(), KeySearchRequest{Topic: "T", Key: "k"}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("key search (the console's): %v", err)
	}
	if n := s.r.CRCFailures(); n != 5 {
		t.Fatalf("%d failures counted, want 5", n)
	}

	off := openOffline(t, fsys, "/store", small)
	if _, err := off.Get(t.Context(), GetRequest{Topic: "T", Offset: 2}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("offline get: %v", err)
	}
	data[bodyAt] ^= 0x01
	if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 0}); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// TestReadsRequirePropCRC: where the rule requires the whole-record CRC entry, a record whose
// entry lost its name (a torn write, a flipped bit) is refused, although its body CRC holds.
func TestReadsRequirePropCRC(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	phys := s.put(msg{body: body(0)})
	v, err := commitlog.Parse(s.log.Queue().Files()[0].Data()[phys:])
	noErr(t, err)
	data := s.log.Queue().Files()[0].Data()
	data[phys+int64(v.TotalSize()-commitlog.PropCRCLen)] = 'x' // "__CRC32#" -> "x_CRC32#"
	if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T"}); err != nil {
		t.Fatalf("without the rule the body CRC decides: %v", err)
	}
	s.r.SetPropCRCRule(PropCRCRuleFrom(0))
	if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T"}); !errors.Is(err, ErrChecksum) ||
		!strings.Contains(err.Error(), "property missing") {
		t.Fatalf("with the rule: %v", err)
	}
	if s.r.SetPropCRCRule(PropCRCRuleFrom(phys + 1)); s.r.propCRC.Requires(phys) {
		t.Fatal("the rule requires the entry before its start")
	}
}

// TestOfflinePropCRCRuleEndsAtDurable: an offline Reader takes the rule from the checkpoint up
// to its durable offset, not past it: it keeps the rule across Refresh, and what a writer
// appends meanwhile (an engine run with --no-prop-crc, a RocketMQ broker) need not carry the
// entry; such records are still checked against their own CRC.
func TestOfflinePropCRCRuleEndsAtDurable(t *testing.T) {
	fsys := vfs.NewMem()
	noErr(t, fsys.MkdirAll("/store"))
	noErr(t, checkpoint.Save(fsys, "/store/"+checkpoint.FileName, checkpoint.Checkpoint{
		Ext: checkpoint.Ext{Valid: true, PropCRCFrom: 100, DurableOffset: 5000}}))
	var r Reader
	r.loadPropCRCRule(fsys, "/store")
	for phys, want := range map[int64]bool{99: false, 100: true, 4999: true, 5000: false, 1 << 40: false} {
		if got := r.propCRC.Requires(phys); got != want {
			t.Errorf("the entry required at %d: %v, want %v", phys, got, want)
		}
	}
}
