package ingress

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
)

// TestConfigSubjectErrors: subjects that cannot be subscribed to, or would store nothing, or
// would store messages twice, are refused by New with an error that names the subject and
// says what is wrong; valid ones pass.
func TestConfigSubjectErrors(t *testing.T) {
	for _, tc := range []struct {
		subjects []string
		group    string
		says     string
	}{
		{[]string{""}, "", "empty subject"},
		{[]string{"orders.>", ""}, "", "empty subject"},
		{[]string{"a b"}, "", "whitespace"},
		{[]string{"a\tb"}, "", "whitespace"},
		{[]string{"a..b"}, "", "empty token"},
		{[]string{".a"}, "", "empty token"},
		{[]string{"a."}, "", "empty token"},
		{[]string{"."}, "", "empty token"},
		{[]string{"a.>.b"}, "", "not the last token"},
		{[]string{"_INBOX.>"}, "", "always excluded"},
		{[]string{"$JS.API.>"}, "", "always excluded"},
		{[]string{">", "orders.eu"}, "", "overlap"},
		{[]string{"orders.*", "orders.eu"}, "", "overlap"},
		{[]string{"a.*.c", "a.b.*"}, "", "overlap"},
		{[]string{"orders.>", "orders.eu.x"}, "", "overlap"},
		{[]string{"orders.eu", "orders.eu"}, "", "overlap"},
		{[]string{"orders.eu"}, "q g", "whitespace"},
	} {
		_, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Subjects: tc.subjects, QueueGroup: tc.group})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q (group %q): %v, want an error saying %q", tc.subjects, tc.group, err, tc.says)
		}
	}
	for _, ok := range [][]string{
		nil, {">"}, {"orders.>", "payments.>"}, {"orders.*", "orders.eu.x"}, {"a.*.c", "a.b.d"},
		{"orders.eu", "orders.us"}, {"*"}, {"a*b.c"}, {"a/b", `a\b`},
	} {
		if _, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Subjects: ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestEveryRejectLogsAtDebug: at debug level each refused message gets a debug line of its
// own (the warning stays rate-limited to one per LogInterval); without debug, no debug lines.
func TestEveryRejectLogsAtDebug(t *testing.T) {
	for _, debug := range []bool{true, false} {
		logs := &syncBuffer{}
		level := zerolog.InfoLevel
		if debug {
			level = zerolog.DebugLevel
		}
		h := newHarness(t, harnessOpts{cfg: func(c *Config) { c.Logger = zerolog.New(logs).Level(level) }})
		const n = 5
		for range n {
			if _, err := h.request(nats.NewMsg("bad.*")); err == nil {
				t.Fatal("a wildcard subject was stored")
			}
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		var debugLines, warnLines int
		for line := range strings.SplitSeq(out, "\n") {
			if !strings.Contains(line, "ingress: message rejected") {
				continue
			}
			if strings.Contains(line, `"level":"debug"`) {
				debugLines++
			} else if strings.Contains(line, `"level":"warn"`) {
				warnLines++
			}
		}
		if s := h.in.Stats(); s.Rejected[wire.CodeInvalid] != n || s.ErrorReplies != n {
			t.Fatalf("stats %+v", s)
		}
		if debug && debugLines != n || !debug && debugLines != 0 || warnLines != 1 {
			t.Fatalf("debug %v: %d debug lines, %d warnings:\n%s", debug, debugLines, warnLines, out)
		}
		if !strings.Contains(out, `"subject":"bad.*"`) || !strings.Contains(out, `"code":400`) {
			t.Fatalf("lines do not say what was refused:\n%s", out)
		}
	}
}
