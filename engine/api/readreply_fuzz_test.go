package api

import (
	"bytes"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// FuzzParseReadBody: the member's decoder of a batched read's reply (bytes from the network)
// never panics, and what it yields stays within what it was given: every section's Data is a
// piece of the body, every record a piece of its section, and a section's Count never exceeds
// what its bytes can hold.
func FuzzParseReadBody(f *testing.F) {
	var recs []byte
	for _, body := range []string{"one", "two", "three"} {
		r, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "t", QueueID: 1,
			Body: []byte(body), Properties: commitlog.AppendProperty(commitlog.AppendProperty(nil, "NATS_SUBJECT", "t.a"), commitlog.PropUniqKey, "k")}, commitlog.EncodeOptions{PropCRC: true})
		if err != nil {
			f.Fatal(err)
		}
		recs = append(recs, r...)
	}
	body := AppendReadSection([]byte(ReadMagic), ReadSection{QueueID: 1, Status: ReadFound, NextOffset: 3, MaxOffset: 3, Count: 3, Data: recs})
	body = AppendReadSection(body, ReadSection{QueueID: 2, Status: ReadFenced, NextOffset: 7})
	f.Add(body)
	f.Add(body[:len(body)-50])
	f.Add(AppendReadSection([]byte(ReadMagic), ReadSection{QueueID: 0, Status: ReadFound, Count: 2, Data: recs[:40]}))
	f.Add([]byte(ReadMagic))
	f.Add([]byte("nonsense"))
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, err := ParseReadBody(b)
		if err != nil {
			return
		}
		for _, s := range secs {
			if len(s.Data) > 0 && !bytes.Contains(b, s.Data) {
				t.Fatalf("queue %d: data that is not in the body", s.QueueID)
			}
			if s.Count > len(s.Data)/commitlog.MinRecordLen+1 {
				t.Fatalf("queue %d: %d records in %d bytes", s.QueueID, s.Count, len(s.Data))
			}
			n := 0
			for r, err := range s.Records() {
				if err != nil {
					break
				}
				if n++; n > s.Count || !bytes.Contains(s.Data, r.Bytes()) {
					t.Fatalf("queue %d: record %d of %d not within the section", s.QueueID, n, s.Count)
				}
				_ = r.Message() // every field a member reads, properties included
			}
		}
	})
}
