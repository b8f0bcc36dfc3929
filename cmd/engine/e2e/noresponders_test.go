package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestRequestNobodyServesGetsNoResponders: the engine's `>` subscription receives every subject,
// but a request on one it never stores that nobody else serves gets NATS's no-responders at once,
// as it would without the engine, never a timeout: a read with --no-read-api, a JetStream API
// request to the embedded server (no JetStream), a request on an _INBOX subject. A subject that
// has a responder gets that responder's answer only, every time; with the read API on, a read is
// answered by it. README.md "The read API over NATS".
func TestRequestNobodyServesGetsNoResponders(t *testing.T) {
	t.Parallel()
	noAPI := startEngine(t, t.TempDir(), "--no-read-api")
	nc := connect(t, noAPI.url)
	const patience = 5 * time.Second // a timeout would take this long; no-responders comes at once
	for _, subject := range []string{"$RS.API.get", "$RS.API.topics", "$JS.API.INFO", "_INBOX.nobody.home", "$SRV.PING"} {
		start := time.Now()
		_, err := nc.Request(subject, []byte(`{"topic":"t","queueId":0}`), patience)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("request on %s: %v after %v, want no responders", subject, err, time.Since(start).Round(time.Millisecond))
		}
	}

	// A responder of its own answers alone: no no-responders from the engine beside its answer.
	sub, err := nc.Subscribe("$MY.service", func(m *nats.Msg) { _ = m.Respond([]byte("served")) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, 128)
	isub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		t.Fatal(err)
	}
	defer isub.Unsubscribe()
	const n = 50
	for range n {
		if err := nc.PublishRequest("$MY.service", inbox, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if m := recv(t, "an answer", replies); string(m.Data) != "served" {
			t.Fatalf("answer %d: %q %v, want the service's only", i, m.Data, m.Header)
		}
	}
	// A no-responders the engine sent beside them would be here before the engine's answer to a
	// later request: its subscription takes them in order, and NATS keeps one publisher's order.
	if _, err := nc.Request("$RS.API.get", nil, waitTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a read after them: %v", err)
	}
	select {
	case m := <-replies:
		t.Fatalf("a second answer: %q %v", m.Data, m.Header)
	default:
	}

	// With the read API on, it answers; the engine's `>` adds nothing, also once the server's
	// subject cache has turned over (publishes on thousands of subjects, never stored).
	withAPI := startEngine(t, t.TempDir())
	nc2 := connect(t, withAPI.url)
	for i := range 3000 {
		if err := nc2.Publish(fmt.Sprintf("$FILL.%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if i%100 != 99 {
			continue
		}
		m, err := nc2.Request("$RS.API.topics", []byte(`{}`), waitTimeout)
		if err != nil || len(m.Data) == 0 {
			t.Fatalf("topics with the read API, after %d other subjects: %v", i+1, err)
		}
	}
}
