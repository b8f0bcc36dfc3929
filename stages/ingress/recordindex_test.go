package ingress

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/wire"
)

// TestRecordIndexMatchesTheRecord: what the encoder works out for dispatch (RecordIndex) is what
// dispatch reads back from the record's properties (derive.TagsCode, derive.KeyHashes): the tag
// code of TAGS, and the IndexFile hashes of the UNIQ_KEY and each KEYS token, in that order.
// Where the encoder cannot be sure (more keys than it holds, several key values), it says so
// rather than guess. The record is encoded and read back as dispatch reads it (derive.PropsOf),
// with keys generated as ingress generates them (the store host's address and
// commitlog.GeneratedSalt: not indexed) and, as in stores written before, with another salt
// (indexed).
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
		{0, "orders.eu", nats.Header{"Rmq-Keys": {" k1  "}}, nil, true},              // one token among spaces
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"  "}}, nil, true},                 // no token at all
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"clé 😀"}, "Rmq-Tags": {"étiquette"}}, nil, false},
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"😀"}, "Rmq-Tags": {"étiquette"}}, nil, true}, // non-ASCII
		{0, "orders.eu", nats.Header{"Rmq-Keys": {"k1", "k2"}, "Rmq-Tags": {"t"}}, seq, false},
	} {
		for _, marked := range []bool{false, true} {
			t.Run(fmt.Sprint(i, ",marked=", marked), func(t *testing.T) {
				b := testBuilder()
				host := netip.MustParseAddrPort("10.0.0.1:10911")
				if marked {
					b.gen = commitlog.NewUniqKeyGen(host.Addr(), 1, commitlog.GeneratedSalt, nil)
					b.host = host.Addr()
				}
				rt := testRouter(c.tokens).Route(c.subject)
				if rt.Err != nil {
					t.Fatal(rt.Err)
				}
				props, _, err := b.buildWith(msgWith(c.subject, c.hdr), rt, c.seq)
				if err != nil {
					t.Fatal(err)
				}
				got := b.index
				generated := c.hdr["Nats-Msg-Id"] == nil && c.seq == nil
				known := c.known
				if marked && generated && len(c.hdr["Rmq-Keys"]) <= 1 {
					known = true // a key not indexed leaves room for two of KEYS
				}
				if got.Known != known {
					t.Fatalf("Known = %v, want %v (%+v)", got.Known, known, got)
				}
				if !got.Known {
					return
				}
				m := commitlog.Message{Topic: rt.Topic, BornTimestamp: 1700000000000, StoreHost: host, Properties: props}
				rec, err := commitlog.AppendRecord(nil, &m, commitlog.EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				v, err := commitlog.Parse(rec)
				if err != nil {
					t.Fatal(err)
				}
				p := derive.PropsOf(v)
				tags := derive.TagsCode(p, 1700000000000, nil)
				hashes := derive.KeyHashes(nil, derive.TopicPrefix(rt.Topic), p)
				if got.TagsCode != tags || fmt.Sprint(got.Hashes[:got.NHashes]) != fmt.Sprint(hashes) {
					t.Fatalf("encoder: tags %d hashes %v; the record gives %d and %v",
						got.TagsCode, got.Hashes[:got.NHashes], tags, hashes)
				}
				if generated && marked != p.UniqGenerated {
					t.Fatalf("a generated key (marked %v) read back as generated %v", marked, p.UniqGenerated)
				}
			})
		}
	}
}
