package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Client tests against fake endpoints on a real embedded nats-server (loopback, random port).
// The engine's own tests cover every operation end to end.

func runServer(t *testing.T) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// fake serves one endpoint under prefix with handle.
func fake(t *testing.T, nc *nats.Conn, prefix, endpoint string, handle func(m *nats.Msg)) {
	t.Helper()
	sub, err := nc.Subscribe(Subject(prefix, endpoint), handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestSubject(t *testing.T) {
	for _, tc := range [][3]string{
		{"", EndpointGet, "$RS.API.get"},
		{"store.api.", EndpointOffsetForTime, "store.api.offset_for_time"},
		{"x", EndpointReplay, "x.replay"},
	} {
		if got := Subject(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Subject(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestClientErrors(t *testing.T) {
	nc := runServer(t)
	ctx := testCtx(t)
	c := NewClient(nc, WithPrefix("t.api"))
	fake(t, nc, "t.api", EndpointOffsets, func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"error":{"code":404,"description":"reader: unknown topic or queue: topic \"x\""}}`))
	})
	_, err := c.Offsets(ctx, "x")
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound || CodeOf(err) != 404 || e.Description == "" {
		t.Fatalf("error reply: %v", err)
	}

	// A micro error without our body (another implementation): the headers carry it.
	fake(t, nc, "t.api", EndpointTopics, func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(micro.ErrorHeader, "overloaded")
		r.Header.Set(micro.ErrorCodeHeader, "503")
		_ = m.RespondMsg(r)
	})
	if _, err := c.Topics(ctx, TopicsRequest{}); CodeOf(err) != CodeUnavailable {
		t.Fatalf("micro error headers: %v", err)
	}

	if _, err := c.Get(ctx, GetRequest{Topic: "x"}); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no engine: %v", err)
	}

	fake(t, nc, "t.api", EndpointFetch, func(*nats.Msg) {}) // never answers
	short := NewClient(nc, WithPrefix("t.api"), WithTimeout(20*time.Millisecond))
	if _, _, err := short.Fetch(context.Background(), FetchRequest{Group: "g"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer within the client timeout: %v", err)
	}
}

// TestClientBody: Body puts a body together from msg range reads.
func TestClientBody(t *testing.T) {
	nc := runServer(t)
	ctx := testCtx(t)
	body := bytes.Repeat([]byte("0123456789"), 1000)
	const chunk = 3000
	var calls atomic.Int64
	fake(t, nc, DefaultPrefix, EndpointMsg, func(m *nats.Msg) {
		calls.Add(1)
		var req MsgRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.MsgID != "ID" {
			_ = m.Respond([]byte(`{"error":{"code":400,"description":"bad"}}`))
			return
		}
		end := min(req.BodyOffset+chunk, len(body))
		out, _ := json.Marshal(Message{MsgID: "ID", Body: body[req.BodyOffset:end], BodySize: len(body),
			BodyOffset: req.BodyOffset, Partial: end-req.BodyOffset < len(body)})
		_ = m.Respond(out)
	})
	got, err := NewClient(nc).Body(ctx, "ID")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) || calls.Load() != int64((len(body)+chunk-1)/chunk) {
		t.Fatalf("body of %d bytes in %d calls", len(got), calls.Load())
	}
}

func TestParseReplayEnd(t *testing.T) {
	m := nats.NewMsg("out")
	if _, ok := ParseReplayEnd(m); ok {
		t.Fatal("a message without the end header is an end")
	}
	m.Header.Set(HeaderReplayEnd, "true")
	m.Header.Set(HeaderReplayCount, strconv.Itoa(42))
	m.Header.Set(HeaderReplayID, "R1")
	m.Header.Set(HeaderReplayError, "boom")
	end, ok := ParseReplayEnd(m)
	if !ok || end != (ReplayEnd{ReplayID: "R1", Count: 42, Error: "boom"}) {
		t.Fatalf("end %+v, %v", end, ok)
	}
}
