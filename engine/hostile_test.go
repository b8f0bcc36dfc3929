package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// Hostile input against a served engine: every kind of input a client can get wrong on purpose,
// through the real server and the real store. Each gets its error reply (code and a description
// that says what is wrong), is counted (ingress Stats.Rejected by code; micro's per-endpoint
// error count for the read API), leaves one debug log line, and stores nothing: the CommitLog
// does not grow, no queue directory appears in the store, nothing appears outside it. The
// engine keeps serving: a valid message published at the end is stored and read back.

// logSink is a log writer safe for concurrent writes that counts lines by message.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is the number of lines at level whose message is msg.
func (l *logSink) count(level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		var e struct {
			Level   string `json:"level"`
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Level == level && e.Message == msg {
			n++
		}
	}
	return n
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logSink) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

const (
	rejectLine  = "ingress: message rejected"
	refusedLine = "read API: request refused"
)

// rawPub is a client that speaks the NATS protocol itself, to send what nats.go refuses to
// (header names with control bytes or invalid UTF-8, a malformed header block).
type rawPub struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, clientURL string) *rawPub {
	t.Helper()
	u, err := url.Parse(clientURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &rawPub{c: c, r: bufio.NewReader(c)}
	if line := p.line(t); !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("raw client: %q", line)
	}
	p.send(t, []byte("CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\n"))
	return p
}

func (p *rawPub) line(t *testing.T) string {
	t.Helper()
	s, err := p.r.ReadString('\n')
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	return strings.TrimRight(s, "\r\n")
}

// send writes b and a PING, and returns once the server's PONG says it processed b.
func (p *rawPub) send(t *testing.T, b []byte) {
	t.Helper()
	if _, err := p.c.Write(append(b, "PING\r\n"...)); err != nil {
		t.Fatal(err)
	}
	for range 100 { // bounded: the server sends PINGs of its own only every few minutes
		switch line := p.line(t); {
		case line == "PONG":
			return
		case line == "PING":
			if _, err := p.c.Write([]byte("PONG\r\n")); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(line, "-ERR"):
			t.Fatalf("raw client: %s", line)
		}
	}
	t.Fatal("raw client: no PONG")
}

// hpub publishes a message with the header block hdr as it is.
func (p *rawPub) hpub(t *testing.T, subject, reply string, hdr, body []byte) {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "HPUB %s %s %d %d\r\n", subject, reply, len(hdr), len(hdr)+len(body))
	b.Write(hdr)
	b.Write(body)
	b.WriteString("\r\n")
	p.send(t, b.Bytes())
}

// headerBlock builds a header block from name/value pairs, byte for byte.
func headerBlock(pairs ...string) []byte {
	b := []byte("NATS/1.0\r\n")
	for i := 0; i+1 < len(pairs); i += 2 {
		b = fmt.Appendf(b, "%s: %s\r\n", pairs[i], pairs[i+1])
	}
	return append(b, "\r\n"...)
}

// storeView is what the test compares to show that nothing was stored: the CommitLog's end, the
// queue directories, and what the directory holding the store holds.
type storeView struct {
	written int64
	topics  []string // consumequeue/<topic>/<queue>
	root    []string
}

func viewStore(t *testing.T, s *served, root string) storeView {
	t.Helper()
	v := storeView{written: s.Engine.Offsets().Written}
	cq := filepath.Join(root, "store", "consumequeue")
	tops, err := os.ReadDir(cq)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, tp := range tops {
		qs, err := os.ReadDir(filepath.Join(cq, tp.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			v.topics = append(v.topics, tp.Name()+"/"+q.Name())
		}
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		v.root = append(v.root, e.Name())
	}
	return v
}

func (v storeView) same(o storeView) bool {
	return v.written == o.written && slices.Equal(v.topics, o.topics) && slices.Equal(v.root, o.root)
}

// checkOwnerOnlyTree fails for any file or directory under dir with a group or other bit.
func checkOwnerOnlyTree(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		n++
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %#o has group or other bits", path, perm)
		} else if d.IsDir() && perm != 0o700 || !d.IsDir() && perm != 0o600 {
			t.Errorf("%s: mode %#o, want 0700 for a directory, 0600 for a file", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d entries under %s", n, dir)
	}
}

func TestServeHostileInput(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	logs := &logSink{}
	opts := testOptions(t, dir)
	opts.MaxBodySize = 1 << 10
	opts.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	s := serve(t, opts, NATSOptions{QueuesPerTopic: 1})
	defer func() {
		if t.Failed() {
			t.Logf("engine log:\n%s", logs)
		}
	}()
	nc := connect(t, s, "hostile")
	a := &apiTest{served: s, nc: nc, client: api.NewClient(nc)}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	a.ctx = ctx
	first := a.store(t, apiMsg("orders.eu", 1)) // the store has a topic before the hostile input
	base := viewStore(t, s, root)
	if len(base.topics) != 1 || !slices.Equal(base.root, []string{"store"}) {
		t.Fatalf("baseline %+v", base)
	}

	t.Run("ingress", func(t *testing.T) { hostileIngress(t, s, nc, logs) })
	if v := viewStore(t, s, root); !v.same(base) {
		t.Fatalf("hostile messages changed the store: %+v, was %+v", v, base)
	}
	t.Run("api", func(t *testing.T) { hostileAPI(t, a, first, logs) })
	if v := viewStore(t, s, root); !v.same(base) {
		t.Fatalf("hostile requests changed the store: %+v, was %+v", v, base)
	}
	if logs.contains("disconnected from nats") {
		t.Fatal("the engine's connection was cut")
	}

	// Still serving: a valid message is stored and read back.
	ok := apiMsg("orders.eu", 2)
	ack := a.store(t, ok)
	if ack.QueueOffset != 1 || ack.CommitLogOffset != base.written {
		t.Fatalf("ack %+v after the hostile input; the log ended at %d", ack, base.written)
	}
	got, err := a.client.Get(ctx, api.GetRequest{Topic: ack.Topic, QueueID: ack.QueueID, Offset: ack.QueueOffset})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	checkWireMessage(t, got.Messages[0], ack, ok)

	// Subjects with bytes that are path separators elsewhere are valid NATS subjects: stored,
	// under topics that escape those bytes, so each queue directory is a plain name inside the
	// store's consumequeue directory.
	for subject, topic := range map[string]string{"odd/slash": "odd%2Fslash", `odd\back`: "odd%5Cback", "odd\x00nul": "odd%00nul"} {
		m := nats.NewMsg(subject)
		m.Data = []byte(subject)
		if ack := a.store(t, m); ack.Topic != topic {
			t.Fatalf("%q stored under %q, want %q", subject, ack.Topic, topic)
		}
		if st, err := os.Stat(filepath.Join(dir, "consumequeue", topic, "0")); err != nil || !st.IsDir() {
			t.Fatalf("%q: queue directory: %v", subject, err)
		}
	}
	if v := viewStore(t, s, root); !slices.Equal(v.root, []string{"store"}) || len(v.topics) != 4 {
		t.Fatalf("after the odd subjects: %+v", v)
	}

	// Every file and directory of the store is owner-only, while running (abort, lock) and
	// after a clean shutdown (checkpoint, config JSON with the consumer offsets).
	if err := a.client.Commit(ctx, api.CommitRequest{Group: "g", Topic: ack.Topic, QueueID: ack.QueueID, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	checkOwnerOnlyTree(t, dir)
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config", "consumerOffset.json")); err != nil {
		t.Fatalf("consumer offsets not written: %v", err)
	}
	checkOwnerOnlyTree(t, dir)
}

// hostileIngress sends every kind of message ingress must refuse, one at a time, and checks the
// reply, the counter and the debug line of each.
func hostileIngress(t *testing.T, s *served, nc *nats.Conn, logs *logSink) {
	raw := dialRaw(t, s.ClientURL())
	inbox := nc.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	msg := func(subject string, body []byte, hdr ...string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = body
		for i := 0; i+1 < len(hdr); i += 2 {
			m.Header.Add(hdr[i], hdr[i+1])
		}
		return m
	}
	many := make([]string, 0, 800)
	for i := range 400 {
		many = append(many, fmt.Sprintf("H%03d", i), strings.Repeat("v", 100))
	}
	type hostile struct {
		name string
		msg  *nats.Msg // through nats.go
		raw  []byte    // or a raw header block, published on msg's subject with msg's body
		code int
		says string
	}
	cases := []hostile{
		{"wildcard token", msg("orders.*", nil), nil, wire.CodeInvalid, "wildcard"},
		{"wildcard tail", msg("orders.>", nil), nil, wire.CodeInvalid, "wildcard"},
		{"wildcard subject", msg(">", nil), nil, wire.CodeInvalid, "wildcard"},
		{"subject not UTF-8", msg("orders.\xff", nil), nil, wire.CodeInvalid, "UTF-8"},
		{"subject with 0x01", msg("orders.\x01", nil), nil, wire.CodeInvalid, "separator"},
		{"topic of 128 bytes", msg(strings.Repeat("a", 128), nil), nil, wire.CodeInvalid, "127"},
		{"escapes make the topic too long", msg(strings.Repeat("/", 43), nil), nil, wire.CodeInvalid, "127"},
		{"subject of 3000 bytes", msg(strings.Repeat("s", 3000), nil), nil, wire.CodeInvalid, "127"},
		{"body over the limit", msg("orders.big", make([]byte, 1<<10+1)), nil, wire.CodeTooLarge, "body too large"},
		{"one header over 32767 bytes", msg("orders.h", nil, "Big", strings.Repeat("v", 40000)), nil, wire.CodeInvalid, "propert"},
		{"400 headers over 32767 bytes", msg("orders.h", nil, many...), nil, wire.CodeInvalid, "propert"},
		{"0x01 in a value", msg("orders.h", nil, "X-Bad", "a\x01b"), nil, wire.CodeInvalid, "0x01"},
		{"0x02 in a value", msg("orders.h", nil, "X-Bad", "a\x02b"), nil, wire.CodeInvalid, "0x02"},
		{"value not UTF-8", msg("orders.h", nil, "X-Bad", "\xc3("), nil, wire.CodeInvalid, "UTF-8"},
		{"empty value", msg("orders.h", nil, "X-Empty", ""), nil, wire.CodeInvalid, "empty"},
		{"0x01 in a name", msg("orders.h", nil), headerBlock("X\x01Y", "v"), wire.CodeInvalid, "0x01"},
		{"0x02 in a name", msg("orders.h", nil), headerBlock("X\x02", "v"), wire.CodeInvalid, "0x02"},
		{"name not UTF-8", msg("orders.h", nil), headerBlock("X\xfe\xff", "v"), wire.CodeInvalid, "UTF-8"},
		{"malformed header block", msg("orders.h", []byte("x")), []byte("NATS/1.0\r\nno colon here\r\n\r\n"), wire.CodeInvalid, "header block"},
		{"reserved DELAY", msg("orders.h", nil, "DELAY", "3"), nil, wire.CodeInvalid, "reserves"},
		{"reserved UNIQ_KEY", msg("orders.h", nil, "UNIQ_KEY", "x"), nil, wire.CodeInvalid, "reserves"},
		{"reserved NATS_SUBJECT", msg("orders.h", nil, "NATS_SUBJECT", "other"), nil, wire.CodeInvalid, "reserves"},
		{"reserved __CRC32#", msg("orders.h", nil, "__CRC32#", "1"), nil, wire.CodeInvalid, "reserves"},
		{"reserved transient", msg("orders.h", nil, "__RMQ.TRANSIENT.X", "1"), nil, wire.CodeInvalid, "reserves"},
		{"a further value's name", msg("orders.h", nil, "Trace#2", "x"), nil, wire.CodeInvalid, "'#' and digits"},
		{"two message ids", msg("orders.h", nil, nats.MsgIdHdr, "a", nats.MsgIdHdr, "b"), nil, wire.CodeInvalid, "one id"},
		{"two tags", msg("orders.h", nil, ingress.DefaultTagsHeader, "a", ingress.DefaultTagsHeader, "b"), nil, wire.CodeInvalid, "TAGS"},
		{"Rs-Seq garbage", msg("orders.h", nil, wire.HeaderSeq, "garbage"), nil, wire.CodeInvalid, wire.HeaderSeq},
		{"Rs-Seq zero", msg("orders.h", nil, wire.HeaderSeq, "s1 0 0"), nil, wire.CodeInvalid, "sequence"},
		{"Rs-Seq floor", msg("orders.h", nil, wire.HeaderSeq, "s1 5 5"), nil, wire.CodeInvalid, "acked floor"},
		{"Rs-Seq stream id", msg("orders.h", nil, wire.HeaderSeq, "../x 2 1"), nil, wire.CodeInvalid, "stream id"},
		{"Rs-Seq overflow", msg("orders.h", nil, wire.HeaderSeq, "s1 99999999999999999999 1"), nil, wire.CodeInvalid, "sequence"},
		{"two Rs-Seq", msg("orders.h", nil, wire.HeaderSeq, "s1 2 1", wire.HeaderSeq, "s1 3 1"), nil, wire.CodeInvalid, "values"},
	}
	for _, c := range cases {
		before := s.Ingress().Stats()
		lines := logs.count("debug", rejectLine)
		if c.raw != nil {
			raw.hpub(t, c.msg.Subject, inbox, c.raw, c.msg.Data)
		} else {
			m := *c.msg
			m.Reply = inbox
			if err := nc.PublishMsg(&m); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		reply, err := replies.NextMsg(serveTimeout)
		if err != nil {
			t.Fatalf("%s: no reply: %v", c.name, err)
		}
		_, err = wire.ParseReply(reply.Data)
		re, ok := errors.AsType[*wire.ReplyError](err)
		if !ok || re.Code != c.code || !strings.Contains(re.Description, c.says) {
			t.Errorf("%s: reply %.300s, want code %d saying %q", c.name, reply.Data, c.code, c.says)
			continue
		}
		after := s.Ingress().Stats()
		if after.Rejected[c.code] != before.Rejected[c.code]+1 || after.Encoded != before.Encoded {
			t.Errorf("%s: rejected %v -> %v, encoded %d -> %d", c.name, before.Rejected, after.Rejected, before.Encoded, after.Encoded)
		}
		if n := logs.count("debug", rejectLine); n != lines+1 {
			t.Errorf("%s: %d debug lines %q, want 1", c.name, n-lines, rejectLine)
		}
	}

	// Subjects with empty tokens never reach the engine: the server does not route them to any
	// subscription, so the publisher hears that nobody listens, and nothing is counted.
	before := s.Ingress().Stats()
	for _, subject := range []string{"..", ".", "orders..eu", ".orders", "orders."} {
		_, err := nc.Request(subject, []byte("x"), serveTimeout)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("%q: %v, want no responders", subject, err)
		}
	}
	if after := s.Ingress().Stats(); after.Received != before.Received {
		t.Errorf("received %d -> %d", before.Received, after.Received)
	}
	st := s.Ingress().Stats()
	if st.ReplyFailures != 0 || st.Failed[wire.CodeInternal] != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestServeRefusesBadSubjects: subjects in the configuration that cannot be subscribed to, or
// would store nothing or store messages twice, make Serve fail with an error that says which
// and why, and leave nothing running: the store opens again at once.
func TestServeRefusesBadSubjects(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		subjects []string
		says     string
	}{
		{[]string{""}, "empty subject"},
		{[]string{"a b"}, "whitespace"},
		{[]string{"orders..eu"}, "empty token"},
		{[]string{"orders.>.eu"}, "not the last token"},
		{[]string{"_INBOX.>"}, "always excluded"},
		{[]string{"$SYS.>"}, "always excluded"},
		{[]string{">", "orders.eu"}, "overlap"},
	} {
		srv, err := Serve(testOptions(t, dir), NATSOptions{Listen: "127.0.0.1:-1", Subjects: tc.subjects})
		if err == nil {
			srv.Shutdown()
			t.Fatalf("%q: served", tc.subjects)
		}
		if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), strconv.Quote(tc.subjects[len(tc.subjects)-1])) {
			t.Errorf("%q: %v, want an error naming the subject and saying %q", tc.subjects, err, tc.says)
		}
	}
	e := mustOpen(t, testOptions(t, dir)) // the lock was released
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
