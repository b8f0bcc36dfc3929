package replay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// source reads the queues of a replay in small batches and merges them in CommitLog
// order. Owned by the replay's goroutine.
type source struct {
	store      Store
	topic      string
	tags       []string
	subject    string
	batchBytes int
	queues     []*queue
}

// queue is one queue's read position and its batch not sent yet.
type queue struct {
	id         int32
	next, stop int64
	buf        []reader.Message
}

// next returns the message with the lowest CommitLog offset among the queues' heads, nil once
// every queue reached its stop offset. The message stays valid after later calls.
func (s *source) next(ctx context.Context) (*reader.Message, error) {
	var best *queue
	for _, q := range s.queues {
		if err := s.fill(ctx, q); err != nil {
			return nil, err
		}
		if len(q.buf) > 0 && (best == nil || q.buf[0].PhysicalOffset < best.buf[0].PhysicalOffset) {
			best = q
		}
	}
	if best == nil {
		return nil, nil
	}
	m := &best.buf[0]
	best.buf = best.buf[1:]
	return m, nil
}

// fill reads q's next batch when its buffer is empty and it has not reached its stop offset.
// Units filtered out or whose records retention deleted are skipped.
func (s *source) fill(ctx context.Context, q *queue) error {
	for len(q.buf) == 0 && q.next < q.stop { // each round moves next up, or ends the queue
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := s.store.Get(ctx, reader.GetRequest{
			Topic: s.topic, QueueID: q.id, Offset: q.next, Max: replayBatch, MaxBytes: s.batchBytes, Tags: s.tags, Subject: s.subject,
		})
		if err != nil {
			return fmt.Errorf("engine: replay: read %s/%d at %d: %w", s.topic, q.id, q.next, err)
		}
		q.buf = nil // the messages handed out keep the old array
		for _, m := range res.Messages {
			if m.QueueOffset < q.stop {
				q.buf = append(q.buf, m)
			}
		}
		if res.NextOffset <= q.next && len(res.Messages) == 0 {
			q.next = q.stop // nothing more can be read (the queue was truncated below stop)
			break
		}
		q.next = min(res.NextOffset, q.stop)
	}
	return nil
}

// Headers rebuilds the original NATS headers of m from its properties (RebuildHeaders).
func Headers(m *reader.Message, keysHeader, tagsHeader string) nats.Header {
	h := nats.Header{}
	RebuildHeaders(h, m, keysHeader, tagsHeader, func(b []byte) string { return string(b) })
	return h
}

// HeaderSink is what RebuildHeaders writes the headers to; nats.Header is one.
type HeaderSink interface {
	Set(name, value string)
	Add(name, value string)
}

// RebuildHeaders writes the original NATS headers of m, rebuilt from its properties, to h: the
// subject it came on (Rs-Subject), its id (Nats-Msg-Id, or Rs-Uniq-Key for an id ingress
// generated or one not from NATS), KEYS and TAGS under keysHeader and tagsHeader (not TAGS that
// is the subject: the subject-tag rule's, docs/CONFIG.md), and every other header ingress
// stored, in order; properties the store sets and names NATS cannot carry are left out. str
// makes a property's bytes a string: a copy, or a view where the bytes stay as they are while h
// is used (the read API's pull, which builds its headers in place).
func RebuildHeaders(h HeaderSink, m *reader.Message, keysHeader, tagsHeader string, str func([]byte) string) {
	fromNATS := false
	uniq := ""
	var subject []byte // NATS_SUBJECT, once seen
	it := commitlog.Properties(m.RawProperties).Iter()
	for {
		n, v, ok := it.Next()
		if !ok {
			break
		}
		name, value := str(n), str(v)
		switch name {
		case ingress.PropNatsSubject:
			fromNATS, subject = true, v
			h.Set(api.HeaderSubject, value)
			continue
		case commitlog.PropUniqKey:
			uniq = value
			continue
		case commitlog.PropKeys:
			h.Set(keysHeader, value)
			continue
		case commitlog.PropTags:
			// TAGS that is the subject itself is the subject-tag rule's, not a header the
			// publisher sent (that one, if any, is stored under its own name). Ingress writes
			// NATS_SUBJECT first; other writers may put it later, so only then look ahead.
			if !fromNATS {
				subject, _ = commitlog.Properties(m.RawProperties).Get(ingress.PropNatsSubject)
			}
			if subject == nil || string(subject) != string(v) {
				h.Set(tagsHeader, value)
			}
			continue
		}
		if base, ok := ValueSuffixBase(name); ok {
			name = base // the k-th value of header base
		}
		if ingress.ReservedProperty(name) || !ValidHeaderName(name) {
			continue // set by the store, or a name NATS cannot carry
		}
		h.Add(name, value)
	}
	if uniq != "" {
		if fromNATS && !GeneratedUniqKey(uniq, m.BornTimestamp) {
			h.Set(nats.MsgIdHdr, uniq)
		} else {
			h.Set(api.HeaderUniqKey, uniq)
		}
	}
}

// natsMsg rebuilds the NATS message of m: its body, its original headers (Headers), and the
// replay's headers. redelivered > 0 marks a message sent again.
func (r *Replay) natsMsg(m *reader.Message, seq int64, redelivered int) *nats.Msg {
	h := Headers(m, r.req.KeysHeader, r.req.TagsHeader)
	h.Set(api.HeaderTopic, m.Topic)
	h.Set(api.HeaderQueueID, strconv.Itoa(int(m.QueueID)))
	h.Set(api.HeaderQueueOffset, strconv.FormatInt(m.QueueOffset, 10))
	h.Set(api.HeaderMsgID, m.MsgID)
	h.Set(api.HeaderStoreTimestamp, strconv.FormatInt(m.StoreTimestamp, 10))
	h.Set(api.HeaderReplayID, r.req.ID)
	h.Set(api.HeaderReplaySeq, strconv.FormatInt(seq, 10))
	if redelivered > 0 {
		h.Set(api.HeaderReplayRedelivered, strconv.Itoa(redelivered))
	}
	return &nats.Msg{Subject: r.req.Subject, Header: h, Data: m.Body}
}

// endMsg is the end message: no body, Rs-Replay-End: true, the count, and the error if any.
func (r *Replay) endMsg(seq, count int64, errText string) *nats.Msg {
	h := nats.Header{}
	h.Set(api.HeaderReplayID, r.req.ID)
	h.Set(api.HeaderReplaySeq, strconv.FormatInt(seq, 10))
	h.Set(api.HeaderReplayEnd, "true")
	h.Set(api.HeaderReplayCount, strconv.FormatInt(count, 10))
	if errText != "" {
		h.Set(api.HeaderReplayError, errText)
	}
	return &nats.Msg{Subject: r.req.Subject, Header: h}
}

// ValueSuffixBase splits "name#k" (k digits, k >= 2), the form ingress stores a header's k-th
// value in, into name.
func ValueSuffixBase(name string) (string, bool) {
	i := len(name)
	for i > 0 && '0' <= name[i-1] && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || i < 2 || name[i-1] != '#' {
		return "", false
	}
	return name[:i-1], true
}

// ValidHeaderName is nats.go's rule for header names (printable ASCII but for a few separators);
// nats.go refuses to publish a message with any other.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 33 || c > 126 || strings.IndexByte(`"()/,:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// GeneratedUniqKey says key has the form of a UNIQ_KEY that ingress generated for a message
// without Nats-Msg-Id (commitlog.UniqKeyGen: 32 or 56 uppercase hex digits, ending in the ms
// since the start of the month and a counter) made within a minute of bornMs, when ingress took
// the message. A Nats-Msg-Id that happens to pass is replayed as Rs-Uniq-Key: the safe side.
func GeneratedUniqKey(key string, bornMs int64) bool {
	if len(key) != 32 && len(key) != 56 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	diff, err := strconv.ParseUint(key[len(key)-12:len(key)-4], 16, 32)
	if err != nil {
		return false
	}
	// The generator keeps the ms since the month's start in 32 bits, which wrap after 24.8
	// days (as in Java): compare modulo 2^32.
	born := time.UnixMilli(bornMs)
	month := time.Date(born.Year(), born.Month(), 1, 0, 0, 0, 0, born.Location())
	for _, start := range []time.Time{month, month.AddDate(0, -1, 0)} {
		if d := int32(uint32(bornMs-start.UnixMilli()) - uint32(diff)); -60_000 <= d && d <= 60_000 {
			return true
		}
	}
	return false
}
