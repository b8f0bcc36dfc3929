package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Client.Pull and Consumer against a fake pull endpoint on a real embedded nats-server; the
// engine's tests cover the endpoint itself.

// fakePull serves pulls of a queue of n messages (bodies "m<offset>") under prefix t.api, as
// the engine does; fail, when set, may turn a request into an error end message instead. It
// returns the channel of the requests received.
func fakePull(t *testing.T, nc *nats.Conn, n int64, fail func(req PullRequest) bool) <-chan PullRequest {
	t.Helper()
	reqs := make(chan PullRequest, 100)
	fake(t, nc, "t.api", EndpointPull, func(m *nats.Msg) {
		var r PullRequest
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Errorf("request %s: %v", m.Data, err)
			return
		}
		reqs <- r
		end := nats.NewMsg(m.Reply)
		if fail != nil && fail(r) {
			end.Header.Set(HeaderPullStatus, StatusError)
			end.Header.Set(HeaderPullNextOffset, "0")
			end.Header.Set(HeaderPullCount, "0")
			end.Header.Set(HeaderPullErrorCode, "503")
			end.Header.Set(HeaderPullError, "shutting down")
			_ = nc.PublishMsg(end)
			return
		}
		off, count := r.Offset, 0
		for ; off < n && count < PullMax(r.Max); off++ {
			_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Data: fmt.Appendf(nil, "m%d", off),
				Reply: fmt.Sprintf("%s%d.%d.7F00000100002A9F%016X", PulledPrefix, off, 1700000000000+off, 1000+off)})
			count++
		}
		status := StatusFound
		if count == 0 {
			status = StatusOffsetOverflowOne
		}
		end.Header.Set(HeaderPullStatus, status)
		end.Header.Set(HeaderPullNextOffset, strconv.FormatInt(off, 10))
		end.Header.Set(HeaderPullCount, strconv.Itoa(count))
		end.Header.Set(HeaderPullMinOffset, "0")
		end.Header.Set(HeaderPullMaxOffset, strconv.FormatInt(n, 10))
		_ = nc.PublishMsg(end)
	})
	return reqs
}

func TestPullClient(t *testing.T) {
	nc := runServer(t)
	ctx := testCtx(t)
	c := NewClient(nc, WithPrefix("t.api"))
	fakePull(t, nc, 10, nil)
	res, err := c.Pull(ctx, PullRequest{Topic: "q", QueueID: 2, Offset: 3, Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusFound || res.NextOffset != 7 || res.MinOffset != 0 || res.MaxOffset != 10 || len(res.Messages) != 4 {
		t.Fatalf("pull: %+v", res)
	}
	for i, m := range res.Messages {
		off := int64(3 + i)
		if m.Topic != "q" || m.QueueID != 2 || m.QueueOffset != off || m.CommitLogOffset != 1000+off ||
			m.StoreTimestamp != 1700000000000+off || m.MsgID != fmt.Sprintf("7F00000100002A9F%016X", 1000+off) || m.Partial ||
			m.BodySize != len(m.Body) || string(m.Body) != fmt.Sprint("m", off) || m.Header != nil {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	res, err = c.Pull(ctx, PullRequest{Topic: "q", Offset: 10})
	if err != nil || res.Status != StatusOffsetOverflowOne || len(res.Messages) != 0 || res.NextOffset != 10 {
		t.Fatalf("pull at the head: %+v, %v", res, err)
	}
}

// TestPullClientChecks: a message missing from a pull, a malformed position or an error end
// message are errors; a pull whose end never comes ends with ctx.
func TestPullClientChecks(t *testing.T) {
	nc := runServer(t)
	ctx := testCtx(t)
	c := NewClient(nc, WithPrefix("t.api"), WithTimeout(time.Minute))
	var send func(reply string)
	fake(t, nc, "t.api", EndpointPull, func(m *nats.Msg) { send(m.Reply) })
	msg := func(reply, pos string) {
		_ = nc.PublishMsg(&nats.Msg{Subject: reply, Reply: PulledPrefix + pos, Data: []byte("x")})
	}
	end := func(reply string, count int, extra ...string) {
		e := nats.NewMsg(reply)
		e.Header.Set(HeaderPullStatus, StatusFound)
		e.Header.Set(HeaderPullNextOffset, "9")
		e.Header.Set(HeaderPullCount, strconv.Itoa(count))
		for i := 0; i+1 < len(extra); i += 2 {
			e.Header.Set(extra[i], extra[i+1])
		}
		_ = nc.PublishMsg(e)
	}

	const pos = "1.1700000000000.7F00000100002A9F0000000000000400"
	send = func(reply string) { msg(reply, pos); end(reply, 2) }
	if _, err := c.Pull(ctx, PullRequest{Topic: "q"}); err == nil {
		t.Fatal("a pull that lost a message succeeded")
	}
	for _, bad := range []string{"1.2", "x.2.7F00000100002A9F0000000000000400", "1.2.", ".2.7F00000100002A9F0000000000000400",
		"1234567890123456789.2.7F00000100002A9F0000000000000400", "-1.2.7F00000100002A9F0000000000000400",
		"1.2.7F00000100002A9F00000000000004", "1.2.7F00000100002A9F000000000000040G"} {
		send = func(reply string) { msg(reply, bad); end(reply, 1) }
		if _, err := c.Pull(ctx, PullRequest{Topic: "q"}); err == nil {
			t.Errorf("position %q accepted", bad)
		}
	}
	send = func(reply string) {
		msg(reply, pos)
		end(reply, 1, HeaderPullStatus, StatusError, HeaderPullErrorCode, "500", HeaderPullError, "damaged")
	}
	res, err := c.Pull(ctx, PullRequest{Topic: "q"})
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != 500 || e.Description != "damaged" || res == nil || len(res.Messages) != 1 {
		t.Fatalf("a pull that failed after a message: %+v, %v", res, err)
	}
	send = func(reply string) {
		m := &nats.Msg{Subject: reply, Reply: PulledPrefix + pos, Header: nats.Header{HeaderPartial: {"5000000"}}}
		_ = nc.PublishMsg(m)
		end(reply, 1)
	}
	res, err = c.Pull(ctx, PullRequest{Topic: "q"})
	if err != nil || !res.Messages[0].Partial || res.Messages[0].BodySize != 5000000 || res.Messages[0].CommitLogOffset != 1024 {
		t.Fatalf("partial: %+v, %v", res, err)
	}

	send = func(reply string) { msg(reply, pos) } // no end message
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Pull(short, PullRequest{Topic: "q"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a pull without an end: %v", err)
	}
}

// TestConsumer: batches in order with the next pull requested before Next is called again; a
// failed pull is retried from the same offset; at the head without a wait nothing is pulled
// ahead.
func TestConsumer(t *testing.T) {
	nc := runServer(t)
	ctx := testCtx(t)
	c := NewClient(nc, WithPrefix("t.api"))
	failed := false
	reqs := fakePull(t, nc, 25, func(r PullRequest) bool {
		if r.Offset == 10 && !failed { // the fake's handler runs on one goroutine
			failed = true
			return true
		}
		return false
	})
	k := c.NewConsumer(ConsumerConfig{Topic: "q", Offset: 0, Max: 10, Tags: []string{"a"}})
	defer k.Close()
	next := func(want int64, n int) {
		t.Helper()
		b, err := k.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) != n || (n > 0 && b.Messages[0].QueueOffset != want) || k.Offset() != want+int64(n) {
			t.Fatalf("batch from %d: %d messages, offset %d", want, len(b.Messages), k.Offset())
		}
	}
	request := func(want int64) {
		t.Helper()
		select {
		case r := <-reqs:
			if r.Offset != want || r.Max != 10 || len(r.Tags) != 1 || r.Topic != "q" {
				t.Fatalf("request %+v, want offset %d", r, want)
			}
		case <-ctx.Done():
			t.Fatalf("no request from %d", want)
		}
	}
	next(0, 10)
	request(0)
	request(10) // ahead, before the next call; it fails
	if _, err := k.Next(ctx); CodeOf(err) != CodeUnavailable {
		t.Fatalf("the failed pull: %v", err)
	}
	next(10, 10) // pulled again now
	request(10)
	request(20) // ahead
	next(20, 5)
	request(25) // ahead: the batch had messages
	next(25, 0) // the head, without a wait: nothing ahead now
	if k.ahead != nil {
		t.Fatal("a pull ahead after an empty batch")
	}
	next(25, 0) // pulled now
	request(25)
}
