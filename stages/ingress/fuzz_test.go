package ingress

import (
	"bytes"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// convert runs the conversion a worker applies to one message, without NATS: route (subject ->
// topic, cached), queue choice, then what process does for the message: the batched-ack header's
// parse when it has one (ErrBatchedOff without a tracker), then encode. It returns the record a
// worker would send to Out, or the error it would reply with; the record is zero on error.
func (w *worker) convert(m *nats.Msg, born int64) (stages.Record, error) {
	in := w.in
	rt := in.router.Route(m.Subject)
	j := job{msg: m, route: rt, queue: in.router.Queue(m, rt)}
	if vals := batched.Header(m); vals != nil {
		sh, err := parseSeqHeader(vals)
		if err == nil && in.tracker == nil {
			err = ErrBatchedOff
		}
		if err != nil {
			return stages.Record{}, err
		}
		return w.encodeSeq(&j, born, &sh)
	}
	return w.encode(&j, born)
}

// fuzzMaxBody is the body limit of the fuzzed ingresses, small so that 413 is reachable.
const fuzzMaxBody = 512

// newConverter builds an Ingress that is never run (no connection is used: convert publishes
// nothing) and returns its one worker.
func newConverter(t testing.TB, tokens int, withBatched bool) *worker {
	t.Helper()
	// No topic limit: a fuzz run makes more than DefaultMaxTopics topics, and the subjects past
	// it would go to OverflowTopic, which does not map back (TestTopicLimit tests the limit).
	cfg := Config{
		Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Workers: 1, Mapping: route.Mapping{TopicTokens: tokens, MaxTopics: -1},
		StoreHost: testStoreHost, BornHost: testBornHost,
		Encode: &commitlog.EncodeOptions{PropCRC: true, MaxBodySize: fuzzMaxBody},
	}
	if withBatched {
		cfg.Batched = &batched.Config{}
	}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in.workers[0]
}

// parseFuzzHeaders reads headers from "name:value" lines ('\n'-separated), cut at the first
// ':'; a line without one is a name with an empty value. A name may come several times (several
// values, in order). Names and values hold any other bytes, as a NATS header block can (but for
// CR and LF, which end a header line there).
func parseFuzzHeaders(s string) nats.Header {
	if s == "" {
		return nil
	}
	h := nats.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		name, value, _ := strings.Cut(line, ":")
		h[name] = append(h[name], value) // as received: nats.go does not canonicalize names
	}
	return h
}

// wantProperties is what the record's properties must be for m (but for __CRC32#, which the
// writer stamps, and UNIQ_KEY when it was generated, checked apart): see the package doc.
func wantProperties(m *nats.Msg, tokenTags string, batched bool) (want map[string]string, generatedID bool) {
	h := m.Header
	want = map[string]string{PropNatsSubject: m.Subject}
	switch ids := h[nats.MsgIdHdr]; {
	case len(ids) > 0:
		want[commitlog.PropUniqKey] = ids[0]
	case batched:
		sh, _ := parseSeqHeader(h[wire.HeaderSeq])
		want[commitlog.PropUniqKey] = wire.DerivedMsgID(sh.Stream, sh.Seq)
	default:
		generatedID = true
	}
	if keys := h[DefaultKeysHeader]; len(keys) > 0 {
		want[commitlog.PropKeys] = strings.Join(keys, " ")
	}
	if tags := h[DefaultTagsHeader]; len(tags) > 0 {
		want[commitlog.PropTags] = tags[0]
	} else if tokenTags != "" {
		want[commitlog.PropTags] = tokenTags
	}
	for name, vals := range h {
		switch {
		case name == nats.MsgIdHdr, name == DefaultKeysHeader, name == DefaultTagsHeader:
			continue
		case batched && name == wire.HeaderSeq:
			continue
		}
		for i, v := range vals {
			if i == 0 {
				want[name] = v
			} else {
				want[name+"#"+strconv.Itoa(i+1)] = v
			}
		}
	}
	return want, generatedID
}

// FuzzIngressConvert drives the ingress conversion (subject, headers, body -> record or error)
// under the default rule and the token rule, with batched acks on and off. It never panics; an
// error produces no record and maps to 400 or 413; a record decodes (commitlog.Parse), passes
// commitlog.CheckRecord once stamped, has a valid topic that maps back to its subject (the
// whole subject, or its first N tokens under the token rule, the rest being TAGS), and its
// properties are exactly the headers' (package doc, "Headers -> properties").
func FuzzIngressConvert(f *testing.F) {
	seeds := []struct {
		subject, headers string
		body             []byte
		mode             uint8
	}{
		{"orders.eu", "Nats-Msg-Id:id-1\nRmq-Keys:k1 k2\nRmq-Keys:k3\nRmq-Tags:paid\nTrace:a\nTrace:b", []byte("{}"), 0},
		{"orders.eu.paid.x", "", []byte("body"), 1},
		{"a/b\\c\x00d", "X:y", nil, 0},
		{"..", "", nil, 0},
		{"a.*", "", nil, 0},
		{"a.>", "", nil, 2},
		{"a b", "", nil, 0},
		{"\xff.x", "", nil, 0},
		{strings.Repeat("x", 128), "", nil, 0},
		{strings.Repeat("%", 43), "", nil, 1},
		{"big", "", bytes.Repeat([]byte{'b'}, fuzzMaxBody+1), 0},
		{"props", "Big:" + strings.Repeat("v", 33000), nil, 0},
		{"sep", "X\x01:v", nil, 0},
		{"sep", "X:a\x02b", nil, 0},
		{"utf8", "X\xfe:v", nil, 0},
		{"utf8", "X:\xc3", nil, 0},
		{"reserved", "DELAY:3", nil, 0},
		{"reserved", "__RMQ.TRANSIENT.X:1", nil, 0},
		{"suffix", "Trace#2:x", nil, 0},
		{"empty", "X", nil, 0},
		{"ids", "Nats-Msg-Id:a\nNats-Msg-Id:b", nil, 0},
		{"seq", "Rs-Seq:s1 5 4", []byte("x"), 4},
		{"seq", "Rs-Seq:s1 5 4 r\nNats-Msg-Id:own", []byte("x"), 4},
		{"seq", "Rs-Seq:s1 0 0", nil, 4},
		{"seq", "Rs-Seq:bad/id 2 1", nil, 4},
		{"seq", "Rs-Seq:s1 2 1", nil, 0},
		{"seq", "Rs-Seq:s1 2 1\nRs-Seq:s1 3 1", nil, 4},
	}
	for _, s := range seeds {
		f.Add(s.subject, s.headers, s.body, s.mode)
	}
	// mode: bits 0-1 the token rule's N (0 = default rule), bit 2 batched acks on.
	var workers [8]*worker
	for mode := range workers {
		workers[mode] = newConverter(f, mode&3, mode&4 != 0)
	}
	f.Fuzz(func(t *testing.T, subject, headers string, body []byte, mode uint8) {
		mode &= 7
		w := workers[mode]
		tokens, batchedOn := int(mode&3), mode&4 != 0
		m := &nats.Msg{Subject: subject, Header: parseFuzzHeaders(headers), Data: body}
		hdrCopy := maps.Clone(m.Header)
		rec, err := w.convert(m, 1700000000000)
		if !maps.EqualFunc(m.Header, hdrCopy, func(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }) {
			t.Fatalf("the conversion changed the message's headers: %q -> %q", hdrCopy, m.Header)
		}
		if err != nil {
			if rec.Bytes != nil || rec.Topic != "" || rec.MsgID != "" {
				t.Fatalf("an error (%v) with a record: %+v", err, rec)
			}
			if code := ReplyCode(err); code != wire.CodeInvalid && code != wire.CodeTooLarge {
				t.Fatalf("error %v maps to %d, want 400 or 413", err, code)
			}
			if err.Error() == "" {
				t.Fatal("an error without a description")
			}
			return
		}
		checkConverted(t, rec, m, tokens, batchedOn && m.Header[wire.HeaderSeq] != nil)
	})
}

// checkConverted checks a record convert made from m (see FuzzIngressConvert).
func checkConverted(t *testing.T, rec stages.Record, m *nats.Msg, tokens int, batched bool) {
	t.Helper()
	if len(m.Data) > fuzzMaxBody {
		t.Fatalf("a %d-byte body over the %d limit was taken", len(m.Data), fuzzMaxBody)
	}
	v, err := commitlog.Parse(rec.Bytes)
	if err != nil {
		t.Fatalf("the record does not parse: %v", err)
	}
	if v.TotalSize() != len(rec.Bytes) {
		t.Fatalf("record of %d bytes says %d", len(rec.Bytes), v.TotalSize())
	}
	stamped := bytes.Clone(rec.Bytes)
	commitlog.Stamp(stamped, 7, 0, 1700000000001, rec.PropCRC)
	if size, kind, err := commitlog.CheckRecord(stamped, commitlog.Check{RequirePropCRC: true}); err != nil ||
		kind != commitlog.KindRecord || size != len(stamped) {
		t.Fatalf("stamped record: kind %v, size %d of %d, %v", kind, size, len(stamped), err)
	}
	if sv, _ := commitlog.Parse(stamped); !bytes.Equal(sv.Body(), m.Data) {
		t.Fatalf("body %q, sent %q", sv.Body(), m.Data)
	}

	topic := string(v.Topic())
	if topic != rec.Topic || v.QueueID() != rec.QueueID || rec.QueueID < 0 || rec.QueueID >= DefaultQueuesPerTopic {
		t.Fatalf("record topic %q queue %d, meta %q %d", topic, v.QueueID(), rec.Topic, rec.QueueID)
	}
	if err := commitlog.ValidateTopic(topic); err != nil {
		t.Fatalf("subject %q -> invalid topic: %v", m.Subject, err)
	}
	if topic == "." || topic == ".." || strings.ContainsAny(topic, "/\\\x00.") {
		t.Fatalf("subject %q -> topic %q, which is not a plain directory name", m.Subject, topic)
	}
	head, tokenTags := m.Subject, ""
	if tokens > 0 {
		head, tokenTags = splitTokensOracle(m.Subject, tokens)
	}
	if back, err := route.TopicToSubject(topic); err != nil || back != head {
		t.Fatalf("topic %q maps back to %q (%v), want %q", topic, back, err, head)
	}
	if e := route.CheckPublishedSubject(m.Subject); e != nil {
		t.Fatalf("subject %q stored though %v", m.Subject, e)
	}

	got := map[string]string{}
	n := 0
	it := mustParse(stamped).Properties().Iter()
	for {
		name, value, ok := it.Next()
		if !ok {
			break
		}
		n++
		got[string(name)] = string(value)
	}
	if _, ok := got[commitlog.PropCRC32]; !ok {
		t.Fatal("no __CRC32# property")
	}
	delete(got, commitlog.PropCRC32)
	if n != len(got)+1 {
		t.Fatalf("%d properties, %d distinct names: a name repeats (%q)", n, len(got)+1, got)
	}
	want, generated := wantProperties(m, tokenTags, batched)
	if generated {
		id := got[commitlog.PropUniqKey]
		if len(id) != 32 || rec.MsgID != "" {
			t.Fatalf("generated UNIQ_KEY %q, dedupe id %q", id, rec.MsgID)
		}
		want[commitlog.PropUniqKey] = id
	} else if ids := m.Header[nats.MsgIdHdr]; len(ids) > 0 && rec.MsgID != ids[0] {
		t.Fatalf("dedupe id %q, Nats-Msg-Id %q", rec.MsgID, ids[0])
	}
	if !maps.Equal(got, want) {
		t.Fatalf("properties\n got %q\nwant %q", got, want)
	}
	for name, value := range got {
		if err := commitlog.CheckProperty(name, value); err != nil {
			t.Fatalf("stored property: %v", err)
		}
		if name != PropNatsSubject && name != commitlog.PropUniqKey && name != commitlog.PropKeys &&
			name != commitlog.PropTags {
			if base, _, ok := strings.Cut(name, "#"); ReservedProperty(name) || (ok && ReservedProperty(base)) {
				t.Fatalf("header stored under the reserved name %q", name)
			}
		}
	}
}

// mustParse parses a record known to parse.
func mustParse(b []byte) commitlog.View {
	v, err := commitlog.Parse(b)
	if err != nil {
		panic(err)
	}
	return v
}

// TestConvertErrorsAreClear: each kind of hostile input the fuzz target explores, with its code
// and what its description says.
func TestConvertErrorsAreClear(t *testing.T) {
	w := newConverter(t, 0, true)
	for _, tc := range []struct {
		subject, headers string
		body             []byte
		code             int
		says             string
	}{
		{"..", "", nil, wire.CodeInvalid, "empty token"},
		{"a..b", "", nil, wire.CodeInvalid, "empty token"},
		{".a", "", nil, wire.CodeInvalid, "empty token"},
		{"a.", "", nil, wire.CodeInvalid, "empty token"},
		{"a.*", "", nil, wire.CodeInvalid, "wildcard"},
		{">", "", nil, wire.CodeInvalid, "wildcard"},
		{"a b", "", nil, wire.CodeInvalid, "whitespace"},
		{"a.\xff", "", nil, wire.CodeInvalid, "UTF-8"},
		{"a\x01b", "", nil, wire.CodeInvalid, "separator"},
		{strings.Repeat("a", 128), "", nil, wire.CodeInvalid, "longer than RocketMQ's limit"},
		{strings.Repeat("/", 43), "", nil, wire.CodeInvalid, "longer than RocketMQ's limit"},
		{"big", "", make([]byte, fuzzMaxBody+1), wire.CodeTooLarge, "body too large"},
		{"props", "Big:" + strings.Repeat("v", 33000), nil, wire.CodeInvalid, "properties"},
		{"props", strings.TrimSuffix(strings.Repeat("Many:"+strings.Repeat("v", 100)+"\n", 400), "\n"), nil, wire.CodeInvalid, "properties"},
		{"hdr", "X\x01:v", nil, wire.CodeInvalid, "separator"},
		{"hdr", "X:a\x02b", nil, wire.CodeInvalid, "separator"},
		{"hdr", "X\xfe:v", nil, wire.CodeInvalid, "UTF-8"},
		{"hdr", "X:\xc3(", nil, wire.CodeInvalid, "UTF-8"},
		{"hdr", "X", nil, wire.CodeInvalid, "empty"},
		{"hdr", "DELAY:3", nil, wire.CodeInvalid, "reserves"},
		{"hdr", "NATS_SUBJECT:x", nil, wire.CodeInvalid, "reserves"},
		{"hdr", "__CRC32#:x", nil, wire.CodeInvalid, "reserves"},
		{"hdr", "__RMQ.TRANSIENT.X:1", nil, wire.CodeInvalid, "reserves"},
		{"hdr", "Trace#2:x", nil, wire.CodeInvalid, "'#' and digits"},
		{"hdr", "Nats-Msg-Id:a\nNats-Msg-Id:b", nil, wire.CodeInvalid, "one id"},
		{"hdr", "Rmq-Tags:a\nRmq-Tags:b", nil, wire.CodeInvalid, "TAGS holds one"},
		{"seq", "Rs-Seq:garbage", nil, wire.CodeInvalid, "Rs-Seq"},
		{"seq", "Rs-Seq:s1 0 0", nil, wire.CodeInvalid, "sequence"},
		{"seq", "Rs-Seq:s1 5 5", nil, wire.CodeInvalid, "acked floor"},
		{"seq", "Rs-Seq:../x 2 1", nil, wire.CodeInvalid, "stream id"},
		{"seq", "Rs-Seq:s1 2 1 x", nil, wire.CodeInvalid, "fourth field"},
		{"seq", "Rs-Seq:s1 99999999999999999999 1", nil, wire.CodeInvalid, "sequence"},
	} {
		m := &nats.Msg{Subject: tc.subject, Header: parseFuzzHeaders(tc.headers), Data: tc.body}
		rec, err := w.convert(m, 1)
		if err == nil || ReplyCode(err) != tc.code || !strings.Contains(err.Error(), tc.says) || rec.Bytes != nil {
			t.Errorf("%.30q %.60q: %v (code %d), want %d saying %q", tc.subject, tc.headers, err, ReplyCode(err), tc.code, tc.says)
		}
	}
	// Bytes that are legal in a subject but not in a path are escaped into the topic: stored,
	// and the directory name is a plain one.
	for _, subject := range []string{"a/b", "a\\b", "a\x00b", "x./.y", "%2E%2E"} {
		rec, err := w.convert(&nats.Msg{Subject: subject}, 1)
		if err != nil {
			t.Fatalf("%q: %v", subject, err)
		}
		if strings.ContainsAny(rec.Topic, "/\\\x00.") || commitlog.ValidateTopic(rec.Topic) != nil {
			t.Fatalf("%q -> topic %q", subject, rec.Topic)
		}
	}
	if _, err := w.convert(&nats.Msg{Subject: "ok"}, 1); errors.Is(err, route.ErrInvalidSubject) {
		t.Fatal(err)
	}
}

// splitTokensOracle cuts subject after its n-th token, as the token rule does (route.Mapping),
// written independently of it: head holds the first n tokens, tail the rest.
func splitTokensOracle(subject string, n int) (head, tail string) {
	toks := strings.SplitN(subject, ".", n+1)
	if len(toks) <= n {
		return subject, ""
	}
	return strings.Join(toks[:n], "."), toks[n]
}
