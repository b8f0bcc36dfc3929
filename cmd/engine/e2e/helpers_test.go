package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Helpers shared by the tests: publishers that keep what was acked, and reads through the
// binary or the documented read API.

// sentMsg is a message published with a request, and its ack.
type sentMsg struct {
	subject string
	body    string
	ack     ack
}

// publishAcked sends perSubject requests on each subject, one goroutine per subject, each in
// order and waiting for its ack; it returns what was acked. The subject is the key too, so that
// a subject's messages share one queue.
func publishAcked(t *testing.T, url string, tag string, subjects []string, perSubject int) []sentMsg {
	t.Helper()
	nc := connect(t, url)
	var mu sync.Mutex
	var out []sentMsg
	errs := make(chan error, len(subjects))
	for _, subj := range subjects {
		go func() {
			for i := range perSubject {
				m := msg(subj, fmt.Sprintf("%s %s %d", tag, subj, i), "Nats-Msg-Id", fmt.Sprintf("%s-%s-%d", tag, subj, i), "Rmq-Keys", subj)
				reply, err := nc.RequestMsg(m, waitTimeout)
				if err != nil {
					errs <- fmt.Errorf("%s #%d: %w", subj, i, err)
					return
				}
				var a ack
				if err := json.Unmarshal(reply.Data, &a); err != nil || a.Error != nil || a.Topic == "" {
					errs <- fmt.Errorf("%s #%d: reply %s", subj, i, reply.Data)
					return
				}
				mu.Lock()
				out = append(out, sentMsg{subject: subj, body: string(m.Data), ack: a})
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	var all []error
	for range subjects {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	return out
}

// publishUntilKilled publishes requests on each subject (one goroutine each, the subject as the
// key) until target acks have come, then SIGKILLs the engine while the publishers are still
// sending, and returns what was acked before the kill.
func publishUntilKilled(t *testing.T, e *engine, tag string, subjects []string, target int) []sentMsg {
	t.Helper()
	nc := connect(t, e.url)
	var mu sync.Mutex
	var out []sentMsg
	var n atomic.Int64
	reached := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	const bound = 100000 // the kill ends the loops long before
	for _, subj := range subjects {
		wg.Go(func() {
			for i := range bound {
				m := msg(subj, fmt.Sprintf("%s %s %d", tag, subj, i), "Nats-Msg-Id", fmt.Sprintf("%s-%s-%d", tag, subj, i), "Rmq-Keys", subj)
				reply, err := nc.RequestMsg(m, waitTimeout)
				if err != nil {
					return // the engine, and its embedded server, are gone
				}
				var a ack
				if json.Unmarshal(reply.Data, &a) != nil || a.Error != nil || a.Topic == "" {
					continue // refused while stopping: not acked
				}
				mu.Lock()
				out = append(out, sentMsg{subject: subj, body: string(m.Data), ack: a})
				mu.Unlock()
				if n.Add(1) == int64(target) {
					once.Do(func() { close(reached) })
				}
			}
		})
	}
	select {
	case <-reached:
	case <-e.exited:
		t.Fatalf("engine exited (code %d) before %d acks", e.code, target)
	}
	e.kill()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return append([]sentMsg(nil), out...)
}

// readQueue reads a whole queue with `engine get --json` from src (offline or online).
func readQueue(t *testing.T, src []string, topic string, queue int32) []map[string]any {
	t.Helper()
	r := runCLI(t, append([]string{"get", "--topic", topic, "--queue", itoa(queue), "--json", "--count", "100000"}, src...)...)
	if r.code != 0 {
		t.Fatalf("get %s/%d: exit %d: %s", topic, queue, r.code, r.stderr)
	}
	return ndjson(t, r.stdout)
}

// checkAcked checks, through `engine get` from src, that every acked message is in the store
// at the position its ack gave, with its body and subject, and that each queue holds no gap.
// It returns how many messages the queues hold.
func checkAcked(t *testing.T, src []string, acked []sentMsg) int {
	t.Helper()
	type qk struct {
		topic string
		queue int32
	}
	byQueue := map[qk][]sentMsg{}
	for _, s := range acked {
		k := qk{s.ack.Topic, s.ack.QueueID}
		byQueue[k] = append(byQueue[k], s)
	}
	total := 0
	for k, sent := range byQueue {
		got := readQueue(t, src, k.topic, k.queue)
		total += len(got)
		for i, m := range got {
			if m["queueOffset"] != float64(i) {
				t.Fatalf("%s/%d: message %d has queue offset %v: the queue has a gap", k.topic, k.queue, i, m["queueOffset"])
			}
		}
		for _, s := range sent {
			off := s.ack.QueueOffset
			if off >= int64(len(got)) {
				t.Fatalf("%s/%d: acked offset %d lost: the queue holds %d messages", k.topic, k.queue, off, len(got))
			}
			m := got[off]
			props, _ := m["properties"].(map[string]any)
			if m["msgId"] != s.ack.MsgID || m["commitLogOffset"] != float64(s.ack.CommitLogOffset) ||
				m["body"] != b64(s.body) || props["NATS_SUBJECT"] != s.subject {
				t.Fatalf("%s/%d@%d holds %v, want %q on %s acked as %+v", k.topic, k.queue, off, m, s.body, s.subject, s.ack)
			}
		}
	}
	return total
}

// apiGet is the documented read API's get: {"topic","queueId","offset","max","waitMs"}; with
// waitMs it waits at the head of the queue, so it also waits until a just-acked message is
// readable.
func apiGet(t *testing.T, nc *nats.Conn, topic string, queue int32, offset int64, waitMs int) []map[string]any {
	t.Helper()
	return apiGetAs[map[string]any](t, nc, map[string]any{"topic": topic, "queueId": queue, "offset": offset, "max": 32, "waitMs": waitMs})
}

// apiGetAs sends req to the read API's get and decodes the messages of its reply as M; an error
// reply fails the test.
func apiGetAs[M any](t *testing.T, nc *nats.Conn, req map[string]any) []M {
	t.Helper()
	data, _ := json.Marshal(req)
	reply, err := nc.Request("$RS.API.get", data, waitTimeout)
	if err != nil {
		t.Fatalf("$RS.API.get %s: %v", data, err)
	}
	var r struct {
		Messages []M        `json:"messages"`
		Error    *wireError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &r); err != nil || r.Error != nil {
		t.Fatalf("$RS.API.get %s: %s", data, reply.Data)
	}
	return r.Messages
}

// getReply is the read API's answer to a get, as far as waitReadable needs it.
type getReply struct {
	Messages  []json.RawMessage `json:"messages"`
	MaxOffset int64             `json:"maxOffset"`
	Error     *wireError        `json:"error"`
}

// waitReadable waits, through the read API, until every acked message can be read: a reader
// sees a record once it is dispatched, which follows the ack. A get waits only at the head of
// a queue that exists, so this asks at the head until the message is there, and asks again
// after a pause while the queue is not there yet (the only polling: of another process).
func waitReadable(t *testing.T, nc *nats.Conn, acks ...ack) {
	t.Helper()
	waitReadableAt(t, nc, "$RS.API", acks...)
}

// waitReadableAt is waitReadable for a read API under prefix (--api-prefix).
func waitReadableAt(t *testing.T, nc *nats.Conn, prefix string, acks ...ack) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for _, a := range acks {
		offset := a.QueueOffset
		for {
			if time.Now().After(deadline) {
				t.Fatalf("%s/%d@%d not readable %v after its ack", a.Topic, a.QueueID, a.QueueOffset, waitTimeout)
			}
			req, _ := json.Marshal(map[string]any{"topic": a.Topic, "queueId": a.QueueID, "offset": offset, "max": 1, "waitMs": 5000})
			reply, err := nc.Request(prefix+".get", req, waitTimeout)
			if err != nil {
				t.Fatalf("%s.get %s: %v", prefix, req, err)
			}
			var r getReply
			if err := json.Unmarshal(reply.Data, &r); err != nil {
				t.Fatalf("$RS.API.get %s: %s", req, reply.Data)
			}
			if r.Error != nil && r.Error.Code == 404 { // the queue's first unit is not there yet
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if r.Error != nil {
				t.Fatalf("$RS.API.get %s: %s", req, reply.Data)
			}
			if offset == a.QueueOffset && len(r.Messages) > 0 {
				break
			}
			offset = min(r.MaxOffset, a.QueueOffset) // below it: wait at the head
		}
	}
}
