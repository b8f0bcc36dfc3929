package ingress

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/wire"
)

// TestRecordIndexMatchesTheRecord: what the encoder works out for dispatch (RecordIndex) is what
// dispatch would read from the record's properties: the tag code of TAGS, and the IndexFile
// hashes of the UNIQ_KEY and each KEYS token, in that order. Where the encoder cannot be sure
// (several keys), it says so rather than guess.
func TestRecordIndexMatchesTheRecord(t *testing.T) {
	seq := &wire.SeqHeader{Stream: "S7x", Seq: 42}
	for i, c := range []struct {
		tokens  int
		subject string
		hdr     nats.Header
		seq     *wire.SeqHeader
		known   bool
	}{
		{0, "orders.eu", nil, nil, true},                                  // generated UNIQ_KEY
		{0, "orders.eu", nats.Header{"Nats-Msg-Id": {"id-1"}}, nil, true}, // the publisher's id
		{0, "orders.eu", nil, seq, true},                                  // "<stream>:<seq>"
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"k1"}, "Rmq-Tags": {"paid"}}, seq, true},
		{1, "orders.eu.fast", nats.Header{"Rmq-Keys": {"k1"}}, nil, true},            // TAGS from the subject
		{1, "orders.eu.fast", nats.Header{"Rmq-Tags": {"slow"}}, nil, true},          // the header wins
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"k1 k2"}}, nil, false},             // two keys in one value
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"k1", "k2"}}, nil, false},          // two values
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"k1"}, "Other": {"x"}}, seq, true}, // headers as properties
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b := testBuilder()
			rt := testRouter(c.tokens).Route(c.subject)
			if rt.Err != nil {
				t.Fatal(rt.Err)
			}
			props, _, err := b.buildWith(msgWith(c.subject, c.hdr), rt, c.seq)
			if err != nil {
				t.Fatal(err)
			}
			got := b.index
			if got.Known != c.known {
				t.Fatalf("Known = %v, want %v (%+v)", got.Known, c.known, got)
			}
			if !got.Known {
				return
			}
			d := commitlog.Properties(props).DispatchProps()
			var tags int64
			if len(d.Tags) > 0 {
				tags = int64(javahash.Bytes(d.Tags))
			}
			var hashes []int32
			for _, k := range append([]string{string(d.UniqKey)}, strings.Split(string(d.Keys), " ")...) {
				if k != "" {
					hashes = append(hashes, indexfile.KeyHash(rt.Topic, k))
				}
			}
			if got.TagsCode != tags || fmt.Sprint(got.Hashes[:got.NHashes]) != fmt.Sprint(hashes) {
				t.Fatalf("encoder: tags %d hashes %v; the record's properties give %d and %v",
					got.TagsCode, got.Hashes[:got.NHashes], tags, hashes)
			}
		})
	}
}
