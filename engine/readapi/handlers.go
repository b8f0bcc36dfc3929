package readapi

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/reader"
)

// handleGet answers a get inline, or from a long-poll goroutine when it asks to wait and a slot
// is free.
func (s *Service) handleGet(req micro.Request) {
	if !s.enter() {
		s.respond(req, nil, errShuttingDown)
		return
	}
	r, err := decodeGet(req.Data())
	if err != nil {
		s.respond(req, nil, err)
		s.leave()
		return
	}
	owned := ownsQueue(req, r.QueueID)
	if r.WaitMs > 0 && s.longPoll(func() {
		out, err := s.get(r, false, owned)
		s.reply(req.Reply(), out, err)
	}) {
		return
	}
	out, err := s.get(r, r.WaitMs > 0, owned) // no slot free: answered now, without waiting
	s.respond(req, out, err)
	s.leave()
}

// longPoll runs work on a long-poll goroutine if one of the MaxLongPolls slots is free, and says
// whether it did (else the caller answers at once, without waiting). The goroutine leaves the
// service when work is done; stop waits for it through inflight.
func (s *Service) longPoll(work func()) bool {
	select {
	case s.polls <- struct{}{}:
		go func() {
			defer s.leave()
			defer func() { <-s.polls }()
			if f := hook(&s.polling); f != nil {
				f()
			}
			work()
		}()
		return true
	default:
		return false
	}
}

// get reads (waiting up to r.WaitMs unless skipWait) and encodes the reply within the limit.
// owned: the request came on the queue's partition subject, so the queue is this engine's and
// one it does not have is empty.
func (s *Service) get(r api.GetRequest, skipWait, owned bool) ([]byte, error) {
	limit := s.replyLimit()
	asked := orDefault(r.MaxBytes, reader.DefaultGetMaxBytes)
	fit := max((limit-envelopeRoom)/4*3, 1) // base64 makes every byte 4/3; the rest is checked below
	gr := reader.GetRequest{Topic: r.Topic, QueueID: r.QueueID, Offset: r.Offset, Max: r.Max,
		MaxBytes: min(asked, fit), Tags: r.Tags, Subject: r.Subject, UnknownIsEmpty: owned}
	if !skipWait {
		gr.Wait = time.Duration(min(r.WaitMs, api.MaxWaitMs)) * time.Millisecond
	}
	res, err := s.e.Get(s.ctx, gr)
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, errShuttingDown
		}
		return nil, err
	}
	list, n, err := messageList(res.Messages, limit-envelopeRoom, limit-envelopeRoom-2)
	if err != nil {
		return nil, err
	}
	env := getEnvelope{
		Status: res.Status.String(), NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset,
		WaitSkipped: skipWait, ScanStopped: res.ScanStopped,
	}
	env.Applied.lower("max", int64(r.Max), reader.MaxGetMax)
	env.Applied.lower("maxBytes", int64(r.MaxBytes), int64(min(gr.MaxBytes, reader.MaxGetMaxBytes)))
	env.Applied.lower("waitMs", r.WaitMs, api.MaxWaitMs)
	switch {
	case n < len(res.Messages):
		env.NextOffset, env.Truncated, env.ScanStopped = res.Messages[n].QueueOffset, true, false
	case gr.MaxBytes < asked && n > 0 && n < orDefault(min(r.Max, reader.MaxGetMax), reader.DefaultGetMax) &&
		res.NextOffset < res.MaxOffset:
		env.Truncated = true // the lowered maxBytes may have cut the batch short
	}
	return withMessages(list, env)
}

// msg answers a lookup by message id, with the body range that fits.
func (s *Service) msg(data []byte) ([]byte, error) {
	r, err := decodeMsg(data)
	if err != nil {
		return nil, err
	}
	m, err := s.e.Lookup(r.MsgID)
	if err != nil {
		return nil, err
	}
	if r.BodyOffset > len(m.Body) {
		return nil, badRequest{fmt.Errorf("body range from %d (at most %d bytes) of a %d-byte body",
			r.BodyOffset, r.BodyMax, len(m.Body))}
	}
	w := wireMessage(&m, true)
	w.BodyOffset, w.Partial = r.BodyOffset, true
	meta, err := marshal(w)
	if err != nil {
		return nil, err
	}
	room := s.replyLimit() - len(meta) - 64 // 64: the digits of BodyOffset and the flags may change
	n := min(len(m.Body)-r.BodyOffset, room/4*3)
	if r.BodyMax > 0 {
		n = min(n, r.BodyMax)
	}
	if n <= 0 && r.BodyOffset < len(m.Body) {
		return nil, fmt.Errorf("message %s: %d bytes without its body leave no room for it in a reply "+
			"(max payload %d): raise the server's max_payload", r.MsgID, len(meta), s.replyLimit())
	}
	w.Body = m.Body[r.BodyOffset : r.BodyOffset+n]
	w.Partial = n < len(m.Body)
	return marshal(w)
}

// queryEnvelope is QueryReply but for its messages.
type queryEnvelope struct {
	Truncated bool `json:"truncated,omitempty"`
}

func (s *Service) query(data []byte) ([]byte, error) {
	r, err := decodeQuery(data)
	if err != nil {
		return nil, err
	}
	msgs, err := s.e.Query(s.ctx, reader.QueryRequest{Topic: r.Topic, Key: r.Key, Begin: r.Begin, End: r.End, Max: r.Max})
	if err != nil {
		return nil, err
	}
	limit := s.replyLimit()
	list, n, err := messageList(msgs, limit-envelopeRoom, limit-envelopeRoom-2)
	if err != nil {
		return nil, err
	}
	return withMessages(list, queryEnvelope{Truncated: n < len(msgs)})
}

func (s *Service) offsetForTime(data []byte) ([]byte, error) {
	r, err := decodeOffsetForTime(data)
	if err != nil {
		return nil, err
	}
	off, err := s.e.OffsetForTime(r.Topic, r.QueueID, r.Timestamp)
	if err != nil {
		return nil, err
	}
	return marshal(api.OffsetForTimeReply{Offset: off})
}

func (s *Service) offsets(data []byte) ([]byte, error) {
	r, err := decodeOffsets(data)
	if err != nil {
		return nil, err
	}
	qs, err := s.e.QueueOffsets(r.Topic)
	if err != nil {
		return nil, err
	}
	out := api.OffsetsReply{Topic: r.Topic, Queues: make([]api.QueueOffsets, 0, len(qs))}
	for _, q := range qs {
		out.Queues = append(out.Queues, api.QueueOffsets{QueueID: q.QueueID, MinOffset: q.Min, MaxOffset: q.Max,
			MinStoreTime: q.MinStoreTime, MaxStoreTime: q.MaxStoreTime})
	}
	return marshal(out) // a topic's queues are few: far below any max payload
}

func (s *Service) topics(data []byte) ([]byte, error) {
	r, err := decodeTopics(data)
	if err != nil {
		return nil, err
	}
	all := s.e.Topics()
	room := s.replyLimit() - envelopeRoom
	out := api.TopicsReply{Topics: []api.TopicInfo{}}
	size := 0
	for _, t := range all { // sorted by name
		if t.Name <= r.After {
			continue
		}
		ti := api.TopicInfo{Name: t.Name, Queues: t.Queues}
		raw, err := marshal(ti)
		if err != nil {
			return nil, err
		}
		if size+len(raw)+1 > room {
			out.Truncated = true
			break
		}
		size += len(raw) + 1
		out.Topics = append(out.Topics, ti)
	}
	return marshal(out)
}

func (s *Service) commit(data []byte) ([]byte, error) {
	r, err := decodeCommit(data)
	if err != nil {
		return nil, err
	}
	if r.MemberID == "" {
		if err := s.checkQueue(r.Topic, r.QueueID); err != nil {
			return nil, err
		}
	}
	if s.groups != nil {
		err = s.commitGroup(r)
	} else if r.MemberID != "" {
		err = badRequest{errors.New("memberId: this engine serves no consumer groups")}
	} else {
		err = s.e.CommitOffset(r.Group, r.Topic, r.QueueID, r.Offset)
	}
	if err != nil {
		return nil, err
	}
	return marshal(api.CommitReply{Offset: r.Offset})
}

// checkQueue is reader.ErrUnknownQueue unless the store has the queue.
func (s *Service) checkQueue(topic string, id int32) error {
	qs, err := s.e.QueueOffsets(topic)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.QueueID == id {
			return nil
		}
	}
	return fmt.Errorf("%w: %s/%d", reader.ErrUnknownQueue, topic, id)
}

func (s *Service) fetch(data []byte) ([]byte, error) {
	r, err := decodeFetch(data)
	if err != nil {
		return nil, err
	}
	off, ok := s.e.FetchOffset(r.Group, r.Topic, r.QueueID)
	if !ok {
		off = -1
	}
	return marshal(api.FetchReply{Offset: off, Found: ok})
}

var errTooManyReplays = errors.New("engine: too many replays running")

// handleReplay checks and plans a replay, answers with the plan, and runs the replay on a
// goroutine of its own (at most MaxReplays at once).
func (s *Service) handleReplay(req micro.Request) {
	if !s.enter() {
		s.respond(req, nil, errShuttingDown)
		return
	}
	r, plan, err := s.planReplay(req.Data())
	if err != nil {
		s.respond(req, nil, err)
		s.leave()
		return
	}
	select {
	case s.replays <- struct{}{}:
	default:
		s.respond(req, nil, fmt.Errorf("%w: %d at most; try again when one ends", errTooManyReplays, cap(s.replays)))
		s.leave()
		return
	}
	// The plan goes out before the first message: both go on this connection, in order. The
	// goroutine is bounded by replays; stop waits for it through inflight.
	s.respond(req, plan, nil)
	rq := r.Request()
	go pprof.Do(s.ctx, pprof.Labels("stage", "api", "replay", rq.ID), func(ctx context.Context) {
		defer s.leave()
		defer func() { <-s.replays }()
		res, err := r.Run(ctx)
		ev := s.log.Info()
		if err != nil {
			ev = s.log.Warn().Err(err)
		}
		ev.Str("replay", res.ID).Str("topic", rq.Topic).Str("subject", rq.Subject).
			Int64("sent", res.Sent).Int64("redelivered", res.Redelivered).Msg("replay ended")
	})
}

// planReplay decodes a replay request and prepares it (capturing the stop offsets).
func (s *Service) planReplay(data []byte) (*replay.Replay, []byte, error) {
	req, err := decodeReplay(data, s.prefix)
	if err != nil {
		return nil, nil, err
	}
	req.Conn, req.KeysHeader, req.TagsHeader, req.OnWindowFull = s.nc, s.keys, s.tags, hook(&s.replayFull)
	rp, err := replay.Prepare(s.e, req)
	if err != nil {
		return nil, nil, err
	}
	rq := rp.Request()
	out := api.ReplayReply{ReplayID: rq.ID, Subject: rq.Subject, Mode: rq.Mode.String(),
		MaxCount: rp.PlannedCount(), Queues: make([]api.ReplayQueue, 0, len(rp.Queues()))}
	for _, q := range rp.Queues() {
		out.Queues = append(out.Queues, api.ReplayQueue{QueueID: q.QueueID, StartOffset: q.Start, StopOffset: q.Stop})
	}
	plan, err := marshal(out)
	return rp, plan, err
}
