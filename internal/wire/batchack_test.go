package wire

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// writeAck writes a with a BatchAckWriter, as the engine does.
func writeAck(w *BatchAckWriter, a *BatchAck) []byte {
	w.Begin(a.Stream)
	var item []byte
	for i := range a.Stored {
		item = AppendStoredRun(item[:0], &a.Stored[i])
		w.Add(SectionStored, item)
	}
	for i := range a.Refused {
		item = AppendRefusedRun(item[:0], &a.Refused[i])
		w.Add(SectionRefused, item)
	}
	for _, r := range a.Missing {
		item = AppendMissing(item[:0], r)
		w.Add(SectionMissing, item)
	}
	if a.Error != nil {
		w.Error(a.Error.Code, a.Error.Description)
	}
	return w.Finish(a.Through)
}

// TestBatchAckJSON: what the engine writes is the JSON encoding/json writes of the same
// BatchAck, byte for byte, and both ParseBatchAck and DecodeBatchAck (into reused lists) read it
// back.
func TestBatchAckJSON(t *testing.T) {
	acks := []BatchAck{
		{Stream: "k3Jx9", Stored: []StoredRun{{Topic: "orders_eu", QueueID: 2, QueueOffset: 500, Seq: 1001, Count: 3, Step: 4},
			{Topic: "a\"b", QueueID: 0, QueueOffset: 1 << 40, Seq: 7, Count: 1, Step: 1, Dup: true}},
			Refused: []RefusedRun{{Seq: 1002, Count: 1, Code: 413, Description: "too \"big\"\x01 é"}},
			Missing: [][2]uint64{{1003, 1004}, {9, 9}}, Through: 1001},
		{Stream: "s", Through: 0},
		{Stream: "s", Error: &ReplyError{Code: CodeUnavailable, Description: "stream evicted"}, Through: 12},
	}
	var w BatchAckWriter
	var reused BatchAck
	for _, a := range acks {
		got := writeAck(&w, &a)
		want, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("writer %s\nencoding/json %s", got, want)
		}
		parsed, err := ParseBatchAck(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeBatchAck(got, &reused); err != nil {
			t.Fatal(err)
		}
		for _, b := range []BatchAck{parsed, reused} {
			if b.Stream != a.Stream || b.Through != a.Through || len(b.Stored) != len(a.Stored) ||
				len(b.Refused) != len(a.Refused) || len(b.Missing) != len(a.Missing) || (b.Error == nil) != (a.Error == nil) {
				t.Fatalf("%s read back as %+v", got, b)
			}
			if !slices.Equal(b.Stored, a.Stored) || !slices.Equal(b.Refused, a.Refused) || !slices.Equal(b.Missing, a.Missing) {
				t.Fatalf("%s read back as %+v", got, b)
			}
		}
	}
}

// TestDecodeBatchAckPlainReply: a plain reply on the ack subject is ErrPlainReply, with the
// engine's error when it is one; what is not JSON is another error.
func TestDecodeBatchAckPlainReply(t *testing.T) {
	var a BatchAck
	for _, data := range [][]byte{AppendAck(nil, &Ack{Topic: "t"}), AppendErrorReply(nil, 400, "batched acks are off")} {
		if err := DecodeBatchAck(data, &a); !errors.Is(err, ErrPlainReply) {
			t.Errorf("%s: %v, want ErrPlainReply", data, err)
		}
	}
	if err := DecodeBatchAck([]byte("nope"), &a); err == nil || errors.Is(err, ErrPlainReply) {
		t.Errorf("not JSON: %v", err)
	}
}

// FuzzDecodeBatchAck: any bytes either fail or give an ack with a stream that the writer writes
// back, and that reads back the same, into reused lists too.
func FuzzDecodeBatchAck(f *testing.F) {
	var w BatchAckWriter
	f.Add(writeAck(&w, &BatchAck{Stream: "k", Stored: []StoredRun{{Topic: "t", Seq: 1, Count: 2, Step: 1}},
		Refused: []RefusedRun{{Seq: 3, Count: 1, Code: 413, Description: "x"}}, Missing: [][2]uint64{{4, 5}}, Through: 2}))
	f.Add([]byte(`{"stream":"s","error":{"code":503,"description":"evicted"},"through":9}`))
	f.Add([]byte(`{"topic":"t","queueId":1}`))
	f.Add([]byte(`{"stream":"s","stored":[{"dup":true},{}],"missing":[[1]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a BatchAck
		if err := DecodeBatchAck(data, &a); err != nil {
			return
		}
		if a.Stream == "" {
			t.Fatalf("%q decoded without a stream", data)
		}
		var w BatchAckWriter
		back := writeAck(&w, &a)
		again := BatchAck{Stored: make([]StoredRun, 0, 1), Refused: make([]RefusedRun, 0, 1)}
		again.Stored = append(again.Stored, StoredRun{Dup: true}) // reused memory must not leak into the next ack
		if err := DecodeBatchAck(back, &again); err != nil {
			t.Fatalf("%s, written back from %q, does not decode: %v", back, data, err)
		}
		if string(writeAck(&w, &again)) != string(back) {
			t.Fatalf("%s read back as %+v", back, again)
		}
	})
}
