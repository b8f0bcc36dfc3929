package ingress

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// TestPackTemplateMatchesFullEncoding: a worker that encodes pack entries from a template
// (packtemplate.go) gives every record the bytes, index and fields that encoding each entry in
// full gives: across sequences that gain a digit, bodies of every size, entries with headers of
// their own in between (encoded in full, the template kept), an entry refused for its size, a
// new pack, a new batch time, topics with tags and without, and IPv6 hosts.
func TestPackTemplateMatchesFullEncoding(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprint("v6=", v6), func(t *testing.T) {
			in := &Ingress{cfg: Config{Encode: &commitlog.EncodeOptions{PropCRC: true, MaxBodySize: 1000}}}
			in.cfg.StoreHost = netip.MustParseAddrPort("10.0.0.2:10911")
			if v6 {
				in.cfg.StoreHost = netip.MustParseAddrPort("[2001:db8::2]:10911")
			}
			templ := &worker{in: in, props: *testBuilder()}
			full := &worker{in: in, props: *testBuilder()}
			r := testRouter(1) // "orders.eu.fast" has TAGS fast
			used := 0

			entries := []packEntry{{data: "a"}, {data: ""}, {data: strings.Repeat("b", 300)}}
			entries = append(entries, packEntry{hdr: "NATS/1.0\r\nNats-Msg-Id: own\r\n\r\n", data: "own id"})
			entries = append(entries, packEntry{data: strings.Repeat("c", 1001)}) // too large
			for range 12 {
				entries = append(entries, packEntry{data: "d"})
			}
			for p, c := range []struct {
				subject string
				first   uint64
				born    int64
			}{
				{"orders.eu", 95, 1000}, // 95 ... 111: two digits, then three
				{"orders.eu", 95, 1000}, // the same again, but a new pack
				{"orders.eu", 95, 2000}, // a new batch time
				{"orders.eu.fast", 999_999_990, 2000},
			} {
				sh := wire.SeqHeader{Stream: "S1", Seq: c.first, Acked: c.first - 1}
				msgs, err := wire.SplitPack(nil, appendPack(nil, entries...), len(entries), c.subject, "ack.S1")
				if err != nil {
					t.Fatal(err)
				}
				pk := &batched.Pack{SeqHeader: sh}
				rt := r.Route(c.subject)
				for i := range msgs {
					j := &job{msg: &msgs[i], route: rt, queue: int32(i % 4), pack: pk, seq: c.first + uint64(i)}
					s := pk.EntrySeq(c.first + uint64(i))
					if templated(j, &s) && templ.tmpl.holds(pk, rt, c.born) {
						used++
					}
					var got, want stages.Record
					gotErr := templ.encodeInto(&got, j, c.born, &s)
					full.tmpl = packTemplate{} // never a template: every entry in full
					wantErr := full.encodeInto(&want, j, c.born, &s)
					if (gotErr == nil) != (wantErr == nil) || (wantErr != nil && !errors.Is(gotErr, commitlog.ErrBodyTooLarge)) {
						t.Fatalf("pack %d entry %d: template err %v, full err %v", p, i, gotErr, wantErr)
					}
					if !bytes.Equal(got.Bytes, want.Bytes) || got.Index != want.Index || got.Topic != want.Topic ||
						got.QueueID != want.QueueID || got.MsgID != want.MsgID || got.Reply != want.Reply || got.PropCRC != want.PropCRC {
						t.Fatalf("pack %d entry %d (seq %d):\n template %+v\n full     %+v", p, i, s.Seq, got, want)
					}
				}
			}
			// Each pack's first entry is encoded in full, and so is the one with headers.
			if want := 4 * (len(entries) - 2); used != want {
				t.Fatalf("%d entries from a template, want %d", used, want)
			}
		})
	}
}

func TestIncDecimal(t *testing.T) {
	for _, n := range []uint64{0, 1, 8, 9, 10, 99, 199, 999, 1234, 99999, 1<<63 - 2} {
		got := string(incDecimal([]byte(strconv.FormatUint(n, 10))))
		if want := strconv.FormatUint(n+1, 10); got != want {
			t.Errorf("incDecimal(%d) = %s, want %s", n, got, want)
		}
	}
}
