package offsets

import (
	"crypto/sha256"
	"testing"
)

// FuzzReplayJournal: whatever the bytes after a valid header, replay never panics, applies only
// records that decode, and a journal the engine wrote replays to exactly its records.
func FuzzReplayJournal(f *testing.F) {
	base := sha256.Sum256(nil)
	j := appendHeader(nil, base)
	j = appendRecord(j, record{kind: kindCommit, time: 1, queueID: 2, offset: 3, epoch: 4, group: "g", topic: "t", member: "m"})
	j = appendRecord(j, record{kind: kindDelete, time: 5, group: "g", topic: "t"})
	f.Add(j)
	f.Add(j[:len(j)-3])
	f.Add(appendHeader(nil, base))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []record
		_, _, err := replayJournal(b, base, func(r record) { got = append(got, r) })
		if err != nil {
			return
		}
		// Every record replayed encodes back to bytes that decode to it.
		for _, r := range got {
			enc := appendRecord(nil, r)
			back, n, err := decodeRecord(enc)
			if err != nil || n != len(enc) || back != r {
				t.Fatalf("record %+v: re-decoded %+v, %d of %d bytes, %v", r, back, n, len(enc), err)
			}
		}
	})
}
