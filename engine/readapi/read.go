package readapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// The batched read (endpoint read; docs/GROUPS.md, "Read" and "The batched read's reply"): many
// records of several queues in one NATS message, each as the CommitLog holds it. On the shared
// subject anyone reads any queue; on the engine's own prefix a group member reads the queues it
// holds, each fenced by its epoch.

// readHeadroom is what a read's reply keeps for its headers and its sections' fixed parts, so
// that the records' bytes plus it stay under the connection's max payload.
const readHeadroom = 1024

// readSection is the size of a section's fixed part on the wire (api.AppendReadSection).
const readSection = api.ReadSectionHeader

// decodeRead checks a batched read: a topic, 1 to maxGroupQueues distinct queues with offsets,
// a member's fields together or not at all, no negative bound.
func decodeRead(data []byte) (api.ReadRequest, error) {
	var r api.ReadRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := checkRequestTopic(r.Topic); err != nil {
		return r, err
	}
	switch {
	case len(r.Queues) == 0:
		return r, badRequest{errors.New("no queues")}
	case len(r.Queues) > maxGroupQueues:
		return r, badRequest{fmt.Errorf("%d queues, more than %d", len(r.Queues), maxGroupQueues)}
	case r.Max < 0 || r.MaxBytes < 0 || r.WaitMs < 0:
		return r, badRequest{fmt.Errorf("max %d, maxBytes %d, waitMs %d: none may be negative", r.Max, r.MaxBytes, r.WaitMs)}
	case (r.Group == "") != (r.MemberID == ""):
		return r, badRequest{errors.New("a member's read names both group and memberId")}
	case r.Group != "" && (r.Subject != "" || len(r.Tags) > 0):
		return r, badRequest{errors.New("a member reads with its group's subject filter: no subject or tags")}
	}
	if r.Group != "" {
		if _, err := checkGroupKey(r.Group, r.Topic); err != nil {
			return r, err
		}
		if err := checkMemberID(r.MemberID); err != nil {
			return r, err
		}
	}
	seen := make(map[int32]bool, len(r.Queues))
	for _, q := range r.Queues {
		if q.QueueID < 0 || q.Offset < 0 || q.Epoch < 0 {
			return r, badRequest{fmt.Errorf("queue %d, offset %d, epoch %d: none may be negative", q.QueueID, q.Offset, q.Epoch)}
		}
		if seen[q.QueueID] {
			return r, badRequest{fmt.Errorf("queue %d named twice", q.QueueID)}
		}
		seen[q.QueueID] = true
	}
	r.Tags = noEmptyTags(r.Tags)
	return r, checkSubjectFilter(r.Subject)
}

// handleRead serves a batched read: a long poll on a slot of its own when it may wait, as get.
func (s *Service) handleRead(req micro.Request) {
	if !s.enter() {
		s.respondRead(req.Reply(), nil, nil, errShuttingDown)
		return
	}
	r, err := decodeRead(req.Data())
	if err != nil {
		s.respondRead(req.Reply(), nil, nil, err)
		s.leave()
		return
	}
	if r.WaitMs > 0 && s.longPoll(func() {
		h, body, err := s.read(r, false)
		s.respondRead(req.Reply(), h, body, err)
		recycleReadBody(body)
	}) {
		return
	}
	h, body, err := s.read(r, r.WaitMs > 0) // no slot free: answered now, without waiting
	s.respondRead(req.Reply(), h, body, err)
	recycleReadBody(body)
	s.leave()
}

// readBodies recycles the buffers replies are made in: a read copies its records from the
// CommitLog into one, after the magic, each queue's records after a gap where its section's
// header is then written, and the buffer is the reply's body as it is. It comes back once the
// reply is published (nats.go copies what it publishes). Without it every read allocated (and
// the runtime zeroed) a MiB and a copy of the reply, and collected them: at 1,024 records of
// 128 B a reply, that was as much CPU as reading the records.
var readBodies = sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}

// Only buffers of the pool's size or more, up to maxPooledReadBody, go back to it: a long
// poll's small one, or a body made again around a fenced queue, would fill the pool with
// buffers every next read regrows toward a MiB; a larger one (a reply of many large records) is
// left to the collector.
const (
	minPooledReadBody = 1 << 20
	maxPooledReadBody = 8 << 20
)

func recycleReadBody(b []byte) {
	if cap(b) >= minPooledReadBody && cap(b) <= maxPooledReadBody {
		b = b[:0]
		readBodies.Put(&b)
	}
}

// read reads r and builds the reply's headers and body.
func (s *Service) read(r api.ReadRequest, skipWait bool) (nats.Header, []byte, error) {
	key := groups.Key{Group: r.Group, Topic: r.Topic}
	member := r.Group != ""
	rr := reader.RecordsRequest{Topic: r.Topic, Max: min(orDefault(r.Max, api.DefaultReadMax), api.MaxReadMax),
		Tags: r.Tags, Subject: r.Subject, UnknownIsEmpty: member}
	if member {
		if s.groups == nil {
			return nil, nil, badRequest{errors.New("this engine serves no consumer groups")}
		}
		rr.Subject = s.groups.Subject(key)
	}
	fenced := make([]bool, len(r.Queues))
	for i, q := range r.Queues {
		if member {
			if err := s.groups.AuthorizeRead(key, r.MemberID, q.QueueID, q.Epoch); err != nil {
				if !errors.Is(err, groups.ErrFenced) {
					return nil, nil, err // an unknown member: it joins again
				}
				fenced[i] = true
				continue
			}
		}
		rr.Queues = append(rr.Queues, reader.QueueFrom{QueueID: q.QueueID, Offset: q.Offset})
	}
	room := s.replyLimit() - readHeadroom - len(api.ReadMagic) - readSection*len(r.Queues)
	rr.MaxBytes = max(min(orDefault(r.MaxBytes, api.DefaultReadMaxBytes), room), 1)
	h := nats.Header{}
	h.Set(api.HeaderReadStatus, "OK")
	var a applied
	a.lower("max", int64(r.Max), int64(rr.Max))
	a.lower("maxBytes", int64(r.MaxBytes), int64(rr.MaxBytes))
	a.lower("waitMs", r.WaitMs, api.MaxWaitMs)
	if len(a) > 0 {
		h.Set(api.HeaderApplied, a.header())
	}
	if r.WaitMs > 0 {
		if skipWait {
			h.Set(api.HeaderReadWaitSkipped, "true")
		} else {
			rr.Wait = time.Duration(min(r.WaitMs, api.MaxWaitMs)) * time.Millisecond
		}
	}
	var found []reader.QueueRecords
	body := append((*readBodies.Get().(*[]byte))[:0], api.ReadMagic...)
	if len(rr.Queues) > 0 {
		rr.Gap = readSection // each queue's section header goes in the gap before its records
		wait := rr.Wait
		rr.Wait = 0
		var err error
		found, body, err = s.e.Records(s.ctx, rr, body)
		if err == nil && wait > 0 && !slices.ContainsFunc(found, func(f reader.QueueRecords) bool { return f.Count > 0 }) {
			// Nothing now: the long poll waits with a small buffer of its own rather than a
			// pooled MiB held for the whole wait by every poll (--max-long-polls of them).
			recycleReadBody(body)
			rr.Wait = wait
			found, body, err = s.e.Records(s.ctx, rr, append(make([]byte, 0, 4<<10), api.ReadMagic...))
		}
		if err != nil {
			recycleReadBody(body)
			if s.ctx.Err() != nil {
				return nil, nil, errShuttingDown
			}
			return nil, nil, err
		}
	}
	secs := make([]api.ReadSection, len(r.Queues))
	inPlace := true // every section's records lie in body after a gap for its header
	for i, q := range r.Queues {
		gone := api.ReadSection{QueueID: q.QueueID, Status: api.ReadFenced, NextOffset: q.Offset}
		if fenced[i] {
			secs[i], inPlace = gone, false
			continue
		}
		f := found[0]
		found = found[1:]
		// A long poll was authorized before it waited: the queue may have been asked back, or
		// moved to another member, since. Its messages go to the member only if it still
		// reads the queue now (no message to two live members at once).
		if member && (f.Count > 0 && !s.groups.Served(key, r.MemberID, q.QueueID, q.Epoch, recordOffsets(f.Records, f.Count), f.NextOffset) ||
			f.Count == 0 && !s.groups.StillReads(key, r.MemberID, q.QueueID, q.Epoch)) {
			secs[i], inPlace = gone, false
			continue
		}
		secs[i] = api.ReadSection{QueueID: f.QueueID, Status: api.ReadStatus(f.Status), NextOffset: f.NextOffset,
			MinOffset: f.MinOffset, MaxOffset: f.MaxOffset, Count: f.Count, Data: f.Records}
		if f.TooLarge {
			secs[i].Status = api.ReadTooLarge
		}
	}
	if inPlace {
		at := len(api.ReadMagic)
		for _, sec := range secs {
			api.PutReadSectionHeader(body[at:at+readSection], sec)
			at += readSection + len(sec.Data)
		}
		return h, body, nil
	}
	// A queue fenced has no records here: the sections are made again, in order, around the
	// records of the others.
	recs := body
	body = make([]byte, 0, len(api.ReadMagic)+readSection*len(secs)+len(recs))
	body = append(body, api.ReadMagic...)
	for _, sec := range secs {
		body = api.AppendReadSection(body, sec)
	}
	recycleReadBody(recs)
	return h, body, nil
}

// recordOffsets iterates the queue offsets of count records back to back (read only when the
// coordinator asks: while a queue has messages to count as redelivered).
func recordOffsets(b []byte, count int) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for range count {
			if len(b) < commitlog.PosQueueOffset+8 {
				return
			}
			if !yield(int64(binary.BigEndian.Uint64(b[commitlog.PosQueueOffset:]))) {
				return
			}
			b = b[min(int(binary.BigEndian.Uint32(b)), len(b)):]
		}
	}
}

// respondRead sends a read's reply, or its error: headers Rs-Read-Status ERROR, Rs-Error-Code
// and Rs-Error, and micro's error headers, with no body.
func (s *Service) respondRead(subject string, h nats.Header, body []byte, err error) {
	if subject == "" {
		return // a read without a reply subject: nothing to answer
	}
	if err != nil {
		code := s.code(err)
		s.logRefused(subject, code, err)
		h = nats.Header{}
		h.Set(api.HeaderReadStatus, "ERROR")
		h.Set(api.HeaderErrorCode, strconv.Itoa(code))
		h.Set(api.HeaderError, err.Error())
		h.Set(micro.ErrorHeader, err.Error())
		h.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
		body = nil
	}
	if perr := s.nc.PublishMsg(&nats.Msg{Subject: subject, Header: h, Data: body}); perr != nil {
		s.log.Warn().Err(perr).Str("subject", subject).Int("bytes", len(body)).Msg("read API: could not send a read's reply")
	}
}
