package ingress

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestPlainTemplateMatchesFullEncoding: a worker that encodes plain messages from a template
// (plaintemplate.go) gives every record the bytes, index and fields that encoding each message in
// full gives: bodies of every size, subjects taking turns (each its own template), a message
// with headers in between (encoded in full, the templates kept), one refused for its size, new
// batch times (the templates kept), a month boundary crossed by the generated keys' clock,
// topics with tags and without, with and without the __CRC32# property, and IPv6 hosts.
func TestPlainTemplateMatchesFullEncoding(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, propCRC := range []bool{false, true} {
			t.Run(fmt.Sprint("v6=", v6, ",propCRC=", propCRC), func(t *testing.T) {
				in := &Ingress{cfg: Config{Encode: &commitlog.EncodeOptions{PropCRC: propCRC, MaxBodySize: 1000}}}
				in.cfg.StoreHost = netip.MustParseAddrPort("10.0.0.2:10911")
				if v6 {
					in.cfg.StoreHost = netip.MustParseAddrPort("[2001:db8::2]:10911")
				}
				templ := &worker{in: in, props: *testBuilder()}
				full := &worker{in: in, props: *testBuilder()}
				r := testRouter(1) // "orders.eu.fast" has TAGS fast
				msgs := []*nats.Msg{
					{Subject: "orders.eu", Data: []byte("a")},
					{Subject: "orders.eu", Data: nil},
					{Subject: "orders.eu", Data: []byte(strings.Repeat("b", 300)), Reply: "_INBOX.x"},
					{Subject: "orders.eu.fast", Data: []byte("fast")},
					{Subject: "orders.eu", Data: []byte("again")},
					{Subject: "orders.eu", Header: nats.Header{"Nats-Msg-Id": {"own"}}, Data: []byte("own id")},
					{Subject: "orders.eu", Data: []byte(strings.Repeat("c", 1001))}, // too large
				}
				for range 12 {
					msgs = append(msgs, &nats.Msg{Subject: "orders.eu", Data: []byte("d")})
				}
				used, total := 0, 0
				month := time.Date(2026, time.December, 31, 23, 59, 59, 999e6, time.UTC)
				for b, born := range []time.Time{time.UnixMilli(1000), time.UnixMilli(1000), time.UnixMilli(2000), month, month.Add(time.Millisecond)} {
					templ.props.bornAt, full.props.bornAt = born, born
					for i, m := range msgs {
						rt := r.Route(m.Subject)
						j := &job{msg: m, route: rt, queue: int32(i % 4)}
						if plainTemplated(j, nil) && templ.plain.of(rt) != nil {
							used++
						}
						total++
						var got, want stages.Record
						gotErr := templ.encodeInto(&got, j, born.UnixMilli(), nil)
						full.plain = plainTemplates{} // never a template: every message in full
						wantErr := full.encodeInto(&want, j, born.UnixMilli(), nil)
						if (gotErr == nil) != (wantErr == nil) || (wantErr != nil && !errors.Is(gotErr, commitlog.ErrBodyTooLarge)) {
							t.Fatalf("batch %d message %d: template err %v, full err %v", b, i, gotErr, wantErr)
						}
						if !bytes.Equal(got.Bytes, want.Bytes) || got.Index != want.Index || got.Topic != want.Topic ||
							got.QueueID != want.QueueID || got.MsgID != want.MsgID || got.Reply != want.Reply || got.PropCRC != want.PropCRC {
							t.Fatalf("batch %d message %d:\n template %+v\n full     %+v", b, i, got, want)
						}
					}
				}
				// The first two of orders.eu and of orders.eu.fast are encoded in full (a template
				// is made at a subject's second message), and the one with headers in each batch;
				// the refused one was from the template.
				if want := total - 4 - 5; used != want {
					t.Fatalf("%d of %d messages from a template, want %d", used, total, want)
				}
			})
		}
	}
}

// TestPlainTemplatesBounded: a worker keeps at most maxPlainTemplates templates and as many
// routes seen once, however many subjects it sees; a subject seen once gets no template.
func TestPlainTemplatesBounded(t *testing.T) {
	in := &Ingress{cfg: Config{Encode: &commitlog.EncodeOptions{PropCRC: true}}}
	in.cfg.StoreHost = netip.MustParseAddrPort("10.0.0.2:10911")
	w := &worker{in: in, props: *testBuilder()}
	r := route.NewRouter(route.Mapping{TopicTokens: 1}, 4, "Rmq-Keys", 4*maxPlainTemplates, nil)
	encode := func(subject string) {
		t.Helper()
		m := &nats.Msg{Subject: subject, Data: []byte("21.5")}
		var rec stages.Record
		if err := w.encodeInto(&rec, &job{msg: m, route: r.Route(m.Subject)}, 1000, nil); err != nil {
			t.Fatal(err)
		}
		if n, once := len(w.plain.byRoute), len(w.plain.once); n > maxPlainTemplates || once > maxPlainTemplates {
			t.Fatalf("%d templates and %d routes seen once", n, once)
		}
	}
	for i := range maxPlainTemplates + 10 {
		encode(fmt.Sprintf("wide.%d.temp", i))
	}
	if n := len(w.plain.byRoute); n != 0 {
		t.Fatalf("%d templates made for subjects seen once", n)
	}
	for i := range maxPlainTemplates + 10 {
		encode(fmt.Sprintf("device.%d.temp", i))
		encode(fmt.Sprintf("device.%d.temp", i))
	}
	if n := len(w.plain.byRoute); n == 0 {
		t.Fatal("no template for subjects seen twice")
	}
}

// TestPlainTemplateBudget: the workers share plainTemplateBudget templates, and each keeps at
// least maxPlainTemplates however many workers there are (docs/CONFIG.md, Memory).
func TestPlainTemplateBudget(t *testing.T) {
	for _, tc := range []struct{ workers, each int }{
		{1, plainTemplateBudget}, {2, plainTemplateBudget / 2}, {8, maxPlainTemplates}, {64, maxPlainTemplates},
	} {
		in, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Workers: tc.workers})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range in.workers {
			if got := w.plain.limit(); got != tc.each {
				t.Fatalf("%d workers: %d templates each, want %d", tc.workers, got, tc.each)
			}
		}
	}
}
