package engine

import (
	"context"
	"fmt"
	"testing"
)

// TestDedupePastItsBoundWithTheIndexFile: through Put (a producer that looks nothing up itself),
// ids pushed out of the window's memory past DedupeMax are looked up by the writer in the real
// IndexFile: a retry within the window is a duplicate of the first copy, not stored again; an id
// never stored is stored. Without an IndexFile they are forgotten, and counted.
func TestDedupePastItsBoundWithTheIndexFile(t *testing.T) {
	for _, indexed := range []bool{true, false} {
		t.Run(fmt.Sprintf("index=%v", indexed), func(t *testing.T) {
			opts := testOptions(t, t.TempDir())
			opts.DedupeMax, opts.NoIndex = 4, !indexed
			e := mustOpen(t, opts)
			defer e.Close()
			put := func(ids ...string) []Result {
				t.Helper()
				var msgs []Message
				for _, id := range ids {
					msgs = append(msgs, Message{Topic: "orders", MsgID: id, Body: []byte(id)})
				}
				res, err := e.Put(context.Background(), msgs...)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			first := put("id-0")[0]
			for i := 1; i < 20; i++ {
				put(fmt.Sprint("id-", i)) // one round each: the memory holds the newest 4
			}
			st := e.Stats()
			if st.DedupeSize != 4 || st.DedupeEvicted != 16 {
				t.Fatalf("stats %+v, want 4 ids held, 16 dropped early", st)
			}
			res := put("id-0", "id-new")
			if retry := res[0]; retry.Duplicate != indexed || (indexed && (retry.PhysOffset != first.PhysOffset || retry.Size != first.Size ||
				retry.QueueOffset != first.QueueOffset || retry.MsgID != first.MsgID)) {
				t.Fatalf("a retry of id-0 past the bound: %+v, want a duplicate of %+v: %v", retry, first, indexed)
			}
			if res[1].Duplicate {
				t.Fatal("an id never stored was taken for a duplicate")
			}
			if st := e.Stats(); indexed && (st.DedupeLookups < 2 || st.DedupeFound != 1) || !indexed && st.DedupeLookups != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
