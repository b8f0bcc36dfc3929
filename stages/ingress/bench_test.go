package ingress

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
)

func benchIngress(b *testing.B) *Ingress {
	b.Helper()
	in, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), StoreHost: testStoreHost,
		BornHost: testBornHost, Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkEncode is a worker's work per message: properties from the headers, then the record
// (body CRC included), into the worker's arena.
func BenchmarkEncode(b *testing.B) {
	for _, bc := range []struct {
		name string
		body int
		hdr  nats.Header
	}{
		{"body=100/no-headers", 100, nil},
		{"body=1KiB/headers=5", 1024, nats.Header{
			nats.MsgIdHdr: {"order-42"}, "Rmq-Keys": {"OrderID188 Customer7"}, "Rmq-Tags": {"TagA"},
			"Content-Type": {"application/json"}, "Trace": {"00-abc-def-01"},
		}},
		{"body=16KiB/headers=1", 16 << 10, nats.Header{"Content-Type": {"application/octet-stream"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := benchIngress(b)
			w := in.workers[0]
			m := &nats.Msg{Subject: "orders.eu.paid", Header: bc.hdr, Data: bytes.Repeat([]byte("x"), bc.body)}
			rt := in.router.Route(m.Subject)
			j := job{msg: m, route: rt, queue: in.router.Queue(m, rt)}
			b.SetBytes(int64(bc.body))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := w.encode(&j, 1700000000000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallback is the callback's cheap work per message: exclude check, cached mapping,
// queue choice, worker choice.
func BenchmarkCallback(b *testing.B) {
	in := benchIngress(b)
	m := &nats.Msg{Subject: "orders.eu.paid", Header: nats.Header{"Rmq-Keys": {"OrderID188"}}}
	b.ReportAllocs()
	for b.Loop() {
		if in.cfg.excluded(m.Subject) {
			b.Fatal("excluded")
		}
		rt := in.router.Route(m.Subject)
		_ = rt.Worker(in.router.Queue(m, rt), 4)
	}
}

// BenchmarkAck builds one ack reply (the JSON, the offset message id included).
func BenchmarkAck(b *testing.B) {
	r := stages.Record{Topic: "orders_eu_paid", QueueID: 2, QueueOffset: 123456, PhysOffset: 987654321,
		StoreTimestamp: 1700000000123}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRecordAck(buf[:0], &r, testStoreHost)
	}
}

// BenchmarkPipeline publishes fire-and-forget through an embedded server into ingress, with a
// consumer on Out that calls Done at once: the throughput of the stage with NATS in front.
func BenchmarkPipeline(b *testing.B) {
	srv := runServer(b, 0)
	nc, pub := connect(b, srv), connect(b, srv)
	out := make(chan *stages.Batch, 64)
	in, err := New(Config{Conn: nc, Out: out, StoreHost: testStoreHost, PendingMsgs: -1, PendingBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	count := stages.NewWatermark(0)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		var n int64
		for batch := range out {
			n += int64(len(batch.Records))
			batch.Done(batch)
			count.Advance(n)
		}
	}()
	runErr := make(chan error, 1)
	go func() { runErr <- in.Run(context.Background()) }()
	<-in.Ready()
	body := bytes.Repeat([]byte("x"), 256)
	subjects := make([]string, 16)
	for i := range subjects {
		subjects[i] = "bench.topic" + strconv.Itoa(i)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := pub.Publish(subjects[i%len(subjects)], body); err != nil {
			b.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := count.Wait(b.Context(), int64(b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	in.Stop()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	close(out) // its owner closes Out once ingress has returned (ingress never does)
	<-consumed
	if s := in.Stats(); s.Dropped != 0 {
		b.Fatalf("dropped %d", s.Dropped)
	}
}
