package jspull

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestKey: a JetStream message's dedupe key is its Nats-Msg-Id, else its stream and stream
// sequence; its delivery count says whether it is a redelivery; a message whose reply subject is
// not JetStream's has no stream key.
func TestKey(t *testing.T) {
	msg := func(reply string, id string) *nats.Msg {
		m := nats.NewMsg("orders.eu")
		m.Reply, m.Sub = reply, &nats.Subscription{} // as pulled: bound to the pull subscription
		if id != "" {
			m.Header.Set(nats.MsgIdHdr, id)
		}
		return m
	}
	// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
	first, again := "$JS.ACK.ORDERS.bridge.1.42.7.1700000000000000000.3", "$JS.ACK.ORDERS.bridge.3.42.9.1700000000000000000.3"
	for _, c := range []struct {
		reply, id, key string
		redelivered    bool
	}{
		{first, "", "$JS:ORDERS:42", false},
		{again, "", "$JS:ORDERS:42", true},
		{first, "order-1", "order-1", false},
		{again, "order-1", "order-1", true},
		{"_INBOX.x", "", "", false},
		{"_INBOX.x", "order-1", "order-1", false},
	} {
		key, redelivered := Key(msg(c.reply, c.id))
		if key != c.key || redelivered != c.redelivered {
			t.Errorf("Key(reply %q, id %q) = %q, %v; want %q, %v", c.reply, c.id, key, redelivered, c.key, c.redelivered)
		}
	}
}

// TestFoundSince: a redelivery's first copy is looked up only from when the message entered
// its stream (less the clock skew allowed), so that a stream made again, whose sequences start
// at 1 again, does not find its keys on the old stream's records; a message without JetStream
// metadata is looked up everywhere.
func TestFoundSince(t *testing.T) {
	m := nats.NewMsg("orders.eu")
	m.Reply, m.Sub = "$JS.ACK.ORDERS.bridge.3.42.9.1700000000000000000.3", &nats.Subscription{}
	if got, want := FoundSince(m), int64(1_700_000_000_000-60_000); got != want {
		t.Fatalf("FoundSince = %d, want %d (the stream's time less a minute)", got, want)
	}
	m.Reply = "_INBOX.x"
	if got := FoundSince(m); got != 0 {
		t.Fatalf("FoundSince without metadata = %d, want 0", got)
	}
}
