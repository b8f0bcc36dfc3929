package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A batched-ack publisher written from docs/BATCHED-ACKS.md alone ("Protocol"): a header
// `Rs-Seq: <stream> <seq> <acked>[ r]`, the stream's ack subject as the reply subject, packs
// (`Rs-Pack: <count>` and uvarint-framed entries), and the engine's acks in JSON.

// batchAck is one message on the ack subject: a stream's ack, or a plain error reply.
type batchAck struct {
	Stream string `json:"stream"`
	Stored []struct {
		Topic       string `json:"topic"`
		QueueID     int32  `json:"queueId"`
		QueueOffset int64  `json:"queueOffset"`
		Seq         uint64 `json:"seq"`
		Count       uint64 `json:"count"`
		Step        uint64 `json:"step"`
		Dup         bool   `json:"dup"`
	} `json:"stored"`
	Refused []struct {
		Seq         uint64 `json:"seq"`
		Count       uint64 `json:"count"`
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"refused"`
	Missing [][2]uint64 `json:"missing"`
	Through uint64      `json:"through"`
	Error   *wireError  `json:"error"`
}

// position is where a sequence was stored, and whether that answer was a duplicate's.
type position struct {
	topic  string
	queue  int32
	offset int64
	dup    bool
}

// rawStream is one stream of a raw publisher: what it sent and what the acks said.
type rawStream struct {
	t     *testing.T
	nc    *nats.Conn
	id    string
	inbox string
	acks  chan *nats.Msg

	floor   uint64 // every sequence up to it is answered
	through uint64
	stored  map[uint64]position // the latest position given for each sequence
	refused map[uint64]int      // code
	missing map[uint64]bool
	plain   []wireError // plain error replies on the ack subject
}

func newRawStream(t *testing.T, nc *nats.Conn, id string) *rawStream {
	t.Helper()
	return newRawStreamBuffer(t, nc, id, 1024)
}

// newRawStreamBuffer is newRawStream with room for buffer unread messages on the ack subject
// (nats.go drops what a full channel cannot take).
func newRawStreamBuffer(t *testing.T, nc *nats.Conn, id string, buffer int) *rawStream {
	t.Helper()
	s := &rawStream{t: t, nc: nc, id: id, inbox: nats.NewInbox(), acks: make(chan *nats.Msg, buffer),
		stored: map[uint64]position{}, refused: map[uint64]int{}, missing: map[uint64]bool{}}
	sub, err := nc.ChanSubscribe(s.inbox, s.acks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// rsSeq is the header's value.
func (s *rawStream) rsSeq(seq uint64, resend bool) string {
	v := fmt.Sprintf("%s %d %d", s.id, seq, min(s.floor, seq-1))
	if resend {
		v += " r"
	}
	return v
}

// send publishes one message of the stream, with the ack subject as its reply subject (none
// when noReply), and more headers as name, value pairs.
func (s *rawStream) send(subject string, seq uint64, body string, resend, noReply bool, hdr ...string) {
	s.t.Helper()
	m := msg(subject, body, hdr...)
	m.Header.Set("Rs-Seq", s.rsSeq(seq, resend))
	if !noReply {
		m.Reply = s.inbox
	}
	if err := s.nc.PublishMsg(m); err != nil {
		s.t.Fatal(err)
	}
}

// packEntry is one message of a pack: its headers (name, value pairs) and its data.
type packEntry struct {
	hdr  []string
	data string
}

// sendPack publishes entries as one pack from sequence seq: `Rs-Pack: <count>` and a body of
// uvarint(len(header block)) header block uvarint(len(data)) data per entry.
func (s *rawStream) sendPack(subject string, seq uint64, entries []packEntry) {
	s.t.Helper()
	s.sendPackRaw(subject, seq, len(entries), encodePack(entries))
}

func (s *rawStream) sendPackRaw(subject string, seq uint64, count int, body []byte) {
	s.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set("Rs-Seq", s.rsSeq(seq, false))
	m.Header.Set("Rs-Pack", fmt.Sprint(count))
	m.Reply = s.inbox
	if err := s.nc.PublishMsg(m); err != nil {
		s.t.Fatal(err)
	}
}

func encodePack(entries []packEntry) []byte {
	var b []byte
	for _, e := range entries {
		var block []byte
		if len(e.hdr) > 0 {
			block = []byte("NATS/1.0\r\n")
			for i := 0; i+1 < len(e.hdr); i += 2 {
				block = fmt.Appendf(block, "%s: %s\r\n", e.hdr[i], e.hdr[i+1])
			}
			block = append(block, "\r\n"...)
		}
		b = binary.AppendUvarint(b, uint64(len(block)))
		b = append(b, block...)
		b = binary.AppendUvarint(b, uint64(len(e.data)))
		b = append(b, e.data...)
	}
	return b
}

// apply reads one ack into the stream's state, as "Reading an ack" says.
func (s *rawStream) apply(m *nats.Msg) {
	s.t.Helper()
	var a batchAck
	if err := json.Unmarshal(m.Data, &a); err != nil {
		s.t.Fatalf("ack %q: %v", m.Data, err)
	}
	if a.Stream == "" {
		if a.Error == nil {
			s.t.Fatalf("ack without stream and without error: %s", m.Data)
		}
		s.plain = append(s.plain, *a.Error)
		return
	}
	if a.Stream != s.id {
		s.t.Fatalf("ack of stream %q on %s's ack subject: %s", a.Stream, s.id, m.Data)
	}
	for _, r := range a.Stored {
		for i := range r.Count {
			s.stored[r.Seq+i*r.Step] = position{r.Topic, r.QueueID, r.QueueOffset + int64(i), r.Dup}
			delete(s.missing, r.Seq+i*r.Step)
		}
	}
	for _, r := range a.Refused {
		for i := range r.Count {
			s.refused[r.Seq+i] = r.Code
		}
	}
	for _, rg := range a.Missing {
		for q := rg[0]; q <= rg[1] && q-rg[0] < 1<<16; q++ {
			s.missing[q] = true
		}
	}
	s.through = max(s.through, a.Through)
}

// until reads acks until cond holds, bounded by waitTimeout.
func (s *rawStream) until(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case m := <-s.acks:
			s.apply(m)
		case <-deadline.C:
			s.t.Fatalf("stream %s: %s: not within %v (through %d, stored %v, refused %v, missing %v, plain %v)",
				s.id, what, waitTimeout, s.through, s.stored, s.refused, s.missing, s.plain)
		}
	}
}

// answered says whether every sequence from..to has a position or a refusal.
func (s *rawStream) answered(from, to uint64) bool {
	for q := from; q <= to; q++ {
		_, ok := s.stored[q]
		_, bad := s.refused[q]
		if !ok && !bad {
			return false
		}
	}
	return true
}
