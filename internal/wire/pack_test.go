package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// packEntry is one entry to encode in a test pack.
type packEntry struct {
	hdr  string // the header block, "" for none
	data string
}

// appendPack encodes entries as a pack body, by hand (not with AppendPackEntry, which is tested
// against it).
func appendPack(dst []byte, entries ...packEntry) []byte {
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e.hdr)))
		dst = append(dst, e.hdr...)
		dst = binary.AppendUvarint(dst, uint64(len(e.data)))
		dst = append(dst, e.data...)
	}
	return dst
}

// TestPackEntry: what AppendPackEntry writes (the publisher's side) splits back into the
// messages it was made of (the engine's), and PackEntryLen says how long it is.
func TestPackEntry(t *testing.T) {
	entries := []nats.Msg{
		{Data: []byte("a")},
		{Header: nats.Header{nats.MsgIdHdr: {"m2"}, "Trace": {"x", "y"}}, Data: []byte("bb")},
		{},
	}
	var body []byte
	for i := range entries {
		n := len(body)
		body = AppendPackEntry(body, entries[i].Header, entries[i].Data)
		if got, want := len(body)-n, PackEntryLen(entries[i].Header, entries[i].Data); got != want {
			t.Fatalf("entry %d: %d bytes, PackEntryLen %d", i, got, want)
		}
	}
	msgs, err := SplitPack(nil, body, len(entries), "orders.eu", "ack.s")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range msgs {
		if e.Subject != "orders.eu" || e.Reply != "ack.s" || string(e.Data) != string(entries[i].Data) ||
			fmt.Sprint(e.Header) != fmt.Sprint(entries[i].Header) {
			t.Errorf("entry %d: %+v, want %+v", i, e, entries[i])
		}
	}
	if cap(msgs[0].Data) != 1 {
		t.Error("an entry's data may run into the next entry's bytes")
	}
}

func TestPackErrors(t *testing.T) {
	one := appendPack(nil, packEntry{data: "a"})
	two := appendPack(nil, packEntry{data: "a"}, packEntry{data: "b"})
	for _, c := range []struct {
		name  string
		count []string
		first uint64
		body  []byte
		why   string
	}{
		{"count zero", []string{"0"}, 1, one, "count"},
		{"count sign", []string{"+1"}, 1, one, "count"},
		{"count text", []string{"x"}, 1, one, "count"},
		{"count too big", []string{fmt.Sprint(MaxPackEntries + 1)}, 1, one, "count"},
		{"two values", []string{"1", "1"}, 1, one, "values"},
		{"past 2^63-1", []string{"2"}, MaxSeq, two, "past 2^63-1"},
		{"more than the body holds", []string{"1000"}, 1, two, "cannot fit"},
		{"fewer entries than counted", []string{"2"}, 1, append(slices.Clone(one), 0), "body ends"},
		{"bytes after the last", []string{"1"}, 1, two, "after the last"},
		{"length past the end", []string{"1"}, 1, []byte{0, 9, 'a'}, "past the body"},
		{"length overflow", []string{"1"}, 1, append([]byte{0}, bytes.Repeat([]byte{0xff}, 11)...), "overflows"},
		{"bad header block", []string{"1"}, 1, appendPack(nil, packEntry{hdr: "HTTP/1.1\r\n\r\n"}), "header block"},
		{"nested seq", []string{"1"}, 1, appendPack(nil, packEntry{hdr: "NATS/1.0\r\nRs-Seq: s 1 0\r\n\r\n"}), "must not carry"},
		{"nested pack", []string{"1"}, 1, appendPack(nil, packEntry{hdr: "NATS/1.0\r\nRs-Pack: 1\r\n\r\n"}), "must not carry"},
	} {
		count, err := ParsePackCount(c.count, c.first)
		if err == nil {
			_, err = SplitPack(nil, c.body, count, "x", "r")
		}
		var pe *ProtocolError
		if err == nil || !strings.Contains(err.Error(), c.why) || !errors.As(err, &pe) || pe.ReplyCode() != CodeInvalid {
			t.Errorf("%s: %v, want a protocol error about %q (400)", c.name, err, c.why)
		}
	}
}

// FuzzSplitPack: any body and count either fails or gives exactly count entries, data that are
// pieces of the body no longer than it, and no Rs-Seq or Rs-Pack header in any entry; split
// again into the first split's memory, cleared for reuse, it gives the same.
func FuzzSplitPack(f *testing.F) {
	f.Add(appendPack(nil, packEntry{data: "a"}, packEntry{hdr: "NATS/1.0\r\nA: b\r\n\r\n", data: "c"}), 2, uint64(1))
	f.Add(appendPack(nil, packEntry{}), 1, uint64(1<<63-1))
	f.Add(appendPack(nil, packEntry{hdr: "NATS/1.0\r\nRs-Seq: x\r\n\r\n"}), 1, uint64(5))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 1, uint64(1))
	f.Add([]byte{}, 0, uint64(1))
	f.Fuzz(func(t *testing.T, body []byte, count int, first uint64) {
		if count < 1 || count > MaxPackEntries || first == 0 || first > MaxSeq-uint64(count-1) {
			return // ParsePackCount checks these before SplitPack
		}
		msgs, err := SplitPack(nil, body, count, "s", "r")
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.ReplyCode() != CodeInvalid {
				t.Fatalf("error %v is not a protocol error (400)", err)
			}
			return
		}
		if len(msgs) != count {
			t.Fatalf("%d entries for a count of %d", len(msgs), count)
		}
		want := fmt.Sprint(msgs)
		clear(msgs)
		if again, err := SplitPack(msgs[:0], body, count, "s", "r"); err != nil || fmt.Sprint(again) != want {
			t.Fatalf("split into reused memory: %v, %v; first %v", again, err, want)
		}
		msgs, _ = SplitPack(nil, body, count, "s", "r")
		total := 0
		for i, m := range msgs {
			if m.Header[HeaderSeq] != nil || m.Header[HeaderPack] != nil {
				t.Fatalf("entry %d carries the protocol's headers", i)
			}
			total += len(m.Data)
		}
		if total > len(body) {
			t.Fatalf("%d bytes of data from a body of %d", total, len(body))
		}
	})
}

func TestCheckHeader(t *testing.T) {
	if err := CheckHeader(nats.Header{"A": {"x y"}, nats.MsgIdHdr: {"1"}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []nats.Header{{"A": {"x\r\ny"}}, {"B:c": {"x"}}, {"": {"x"}}, {HeaderSeq: {"s 1 0"}}, {HeaderPack: {"2"}}} {
		if err := CheckHeader(h); err == nil {
			t.Errorf("%v accepted", h)
		}
	}
}
