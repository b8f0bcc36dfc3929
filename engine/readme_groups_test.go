package engine

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// TestREADMEGroupGo runs the Go part of README.md's "Consume as a group" as it is written there
// (its "..." filled in): a member joins with the defaults, hands out the README's three messages
// with their subjects, auto-commit commits what Next marked handled within a second or two, and
// Close commits the last one and leaves. (The shell part: TestREADMEGroupExample in
// cmd/engine/e2e.)
func TestREADMEGroupGo(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`m, err := api.NewClient(nc).Join(ctx, api.MemberConfig{Group: "billing", Topic: "orders_eu"})`,
		`defer m.Close(ctx) // commits what was handled and leaves: the others take its queues at once`,
		`rec, err := m.Next(ctx) // the message before it is handled: auto-commit commits it within 1 s`,
		`handle(rec.Subject(), rec.Body())`,
	} {
		if !strings.Contains(string(readme), line) {
			t.Fatalf("README.md's Go example no longer has %q: update this test", line)
		}
	}
	s := serve(t, testOptions(t, t.TempDir()), NATSOptions{})
	pub := connect(t, s, "publisher")
	for _, body := range []string{"hello world", `{"id":2,"total":12.5}`, `{"id":3,"total":99}`} {
		if _, err := pub.Request("orders.eu", []byte(body), serveTimeout); err != nil {
			t.Fatal(err)
		}
	}
	nc := connect(t, s, "member")
	committed := func() (n int64) {
		for _, o := range s.Engine.GroupOffsets().Queues("billing", "orders_eu") {
			n += o.Offset
		}
		return n
	}

	// The README's code, the loop ending when the test has seen what it waits for.
	var handled []string
	readme3 := func(ctx context.Context, nc *nats.Conn, handle func(subject string, body []byte)) error {
		m, err := api.NewClient(nc).Join(ctx, api.MemberConfig{Group: "billing", Topic: "orders_eu"})
		if err != nil {
			return err
		}
		defer m.Close(ctx) // commits what was handled and leaves: the others take its queues at once
		for {
			rec, err := m.Next(ctx) // the message before it is handled: auto-commit commits it within 1 s
			if err != nil {
				return err
			}
			handle(rec.Subject(), rec.Body())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	autoCommitted := make(chan time.Duration, 1)
	err = readme3(ctx, nc, func(subject string, body []byte) {
		if subject != "orders.eu" {
			t.Errorf("rec.Subject() %q", subject)
		}
		handled = append(handled, string(body))
		if len(handled) < 3 {
			return
		}
		// The first two are handled (Next was called after them); auto-commit commits them.
		start := time.Now()
		for committed() < 2 && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond) // the member's own ticker: nothing to wait on but the table
		}
		autoCommitted <- time.Since(start)
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the loop ended with %v", err)
	}
	if d := <-autoCommitted; committed() < 2 {
		t.Fatalf("auto-commit committed %d of the 2 messages handled within %v", committed(), d)
	} else {
		t.Logf("auto-commit committed the messages handled %v after the third was handed out", d.Round(time.Millisecond))
	}
	if len(handled) != 3 || committed() != 3 {
		t.Fatalf("handled %q; %d committed after Close, want 3", handled, committed())
	}
}
