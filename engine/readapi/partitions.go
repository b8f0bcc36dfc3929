package readapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
)

// The read API under partitioned ingest (docs/SCALE-OUT.md, "Reads"). Every engine registers the
// same service; a queue's data is on its partition's owner only, so:
//
//   - queue-addressed requests (get, pull, offset_for_time) have, besides the shared subjects,
//     one subject per owned partition, <prefix>.p.<p>.<endpoint>, which only the owner (and a
//     standby of it) subscribes to: NATS routes the request to the owner (api.WithPartitions);
//   - queries that need every partition (query by key across a topic, offsets, topics) have
//     fan-out endpoints, <prefix>.all.<endpoint>, without a queue group: every engine answers, and
//     says in headers which partitions its answer covers, so that the client gathers until every
//     partition is covered or a deadline passes and names what is missing (api.Client's *All).

// partitionEndpoints are the queue-addressed endpoints served per owned partition.
var partitionEndpoints = []string{api.EndpointGet, api.EndpointPull, api.EndpointOffsetForTime, api.EndpointQuery}

// addPartitionEndpoints registers the fan-out endpoints and subscribes the per-partition subjects
// of the partitions owned now.
func (s *Service) addPartitionEndpoints(svc micro.Service) error {
	// On its partition's subject, a queue the owner does not have is one that has no message
	// yet: get, pull and offset_for_time answer it as empty, not as unknown (servedPartition).
	s.partHandlers = map[string]micro.HandlerFunc{
		api.EndpointGet: s.handleGet, api.EndpointPull: s.handlePull,
		api.EndpointOffsetForTime: s.handleOffsetForTime, api.EndpointQuery: s.inline(s.query),
	}
	s.partSubs = map[int][]*nats.Subscription{}
	for _, p := range s.cfg.Owned() {
		if err := s.ServePartition(p); err != nil {
			return err
		}
	}
	g := svc.AddGroup(s.prefix+"."+api.FanOutToken, micro.WithGroupQueueGroupDisabled())
	// A queue's history before a handoff is on its former owners: every engine that has the
	// queue answers a fan-out get from its part of it (api.Client.Get falls back to it).
	if err := g.AddEndpoint(api.EndpointGet, micro.HandlerFunc(s.handleGet), micro.WithEndpointMetadata(map[string]string{
		"description": "get from this engine's part of a queue (fan-out: every engine answers)"})); err != nil {
		return fmt.Errorf("read API: fan-out endpoint get: %w", err)
	}
	for _, ep := range []struct {
		name string
		op   func([]byte) ([]byte, error)
		// empty is the answer of an engine that does not have the topic: its partitions hold
		// nothing of it, which is an answer, not an error (api.Client's *All take a partition
		// no answer lists as empty, and a topic no engine lists as unknown everywhere).
		empty func([]byte) ([]byte, error)
	}{
		{api.EndpointQuery, s.query, func([]byte) ([]byte, error) { return marshal(api.QueryReply{Messages: []api.Message{}}) }},
		{api.EndpointOffsets, s.offsets, func(data []byte) ([]byte, error) {
			r, err := decodeOffsets(data)
			if err != nil {
				return nil, err
			}
			return marshal(api.OffsetsReply{Topic: r.Topic, Queues: []api.QueueOffsets{}})
		}},
		{api.EndpointTopics, s.topics, nil},
		{api.EndpointOffsetsForTime, s.offsetsForTime, func(data []byte) ([]byte, error) {
			r, err := decodeOffsetsForTime(data)
			if err != nil {
				return nil, err
			}
			return marshal(api.OffsetsForTimeReply{Topic: r.Topic, Queues: []api.QueueOffsetAt{}})
		}},
	} {
		h := micro.HandlerFunc(func(req micro.Request) {
			covered := micro.WithHeaders(s.covered())
			if !s.enter() {
				s.respond(req, nil, errShuttingDown, covered)
				return
			}
			defer s.leave()
			out, err := ep.op(req.Data())
			if err != nil && ep.empty != nil && (errors.Is(err, reader.ErrNotFound) || errors.Is(err, reader.ErrUnknownQueue)) {
				out, err = ep.empty(req.Data())
			}
			s.respond(req, out, err, covered)
		})
		if err := g.AddEndpoint(ep.name, h, micro.WithEndpointMetadata(map[string]string{
			"description": ep.name + " of this engine's partitions (fan-out: every engine answers)"})); err != nil {
			return fmt.Errorf("read API: fan-out endpoint %s: %w", ep.name, err)
		}
	}
	return nil
}

// offsetsForTime answers, for every queue of the topic here, the first offset at or after the
// time (the fan-out "by time").
func (s *Service) offsetsForTime(data []byte) ([]byte, error) {
	r, err := decodeOffsetsForTime(data)
	if err != nil {
		return nil, err
	}
	qs, err := s.e.QueueOffsets(r.Topic)
	if err != nil {
		return nil, err
	}
	out := api.OffsetsForTimeReply{Topic: r.Topic, Queues: make([]api.QueueOffsetAt, 0, len(qs))}
	for _, q := range qs {
		off, err := s.e.OffsetForTime(r.Topic, q.QueueID, r.Timestamp)
		if err != nil {
			return nil, err
		}
		out.Queues = append(out.Queues, api.QueueOffsetAt{QueueID: q.QueueID, Offset: off})
	}
	return marshal(out)
}

// covered are the headers of a fan-out answer: the partitions owned now.
func (s *Service) covered() micro.Headers {
	return micro.Headers{
		api.HeaderPartitions:     {formatPartitions(s.cfg.Owned())},
		api.HeaderPartitionCount: {strconv.Itoa(s.cfg.PartitionCount)},
	}
}

// ServePartition subscribes the per-partition subjects of partition p (queue subscriptions in
// the service's queue group: an owner and a standby may share them). Plain subscriptions, not
// micro endpoints: a partition that moves away must stop being served here, and micro cannot
// remove one endpoint.
func (s *Service) ServePartition(p int) error {
	s.partMu.Lock()
	defer s.partMu.Unlock()
	if _, ok := s.partSubs[p]; ok {
		return nil
	}
	var subs []*nats.Subscription
	for _, name := range partitionEndpoints {
		h := s.partHandlers[name]
		subject := api.PartitionSubject(s.prefix, p, name)
		sub, err := s.nc.QueueSubscribe(subject, micro.DefaultQueueGroup, func(m *nats.Msg) { h(msgRequest{m, p}) })
		if err != nil {
			for _, sub := range subs {
				_ = sub.Unsubscribe()
			}
			return fmt.Errorf("read API: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
	}
	s.partSubs[p] = subs
	return s.nc.Flush()
}

// UnservePartition drains the per-partition subscriptions of p (requests under way are
// answered).
func (s *Service) UnservePartition(p int) {
	s.partMu.Lock()
	defer s.partMu.Unlock()
	for _, sub := range s.partSubs[p] {
		if err := sub.Drain(); err != nil {
			s.log.Debug().Err(err).Str("subject", sub.Subject).Msg("read API: drain")
		}
	}
	delete(s.partSubs, p)
}

// msgRequest is a micro.Request over a plain subscription's message (servePartition), answered
// as micro answers; part is the partition whose subject it came on.
type msgRequest struct {
	m    *nats.Msg
	part int
}

// servedPartition is the partition whose subject req came on, -1 for the shared and fan-out
// subjects.
func servedPartition(req micro.Request) int {
	if m, ok := req.(msgRequest); ok {
		return m.part
	}
	return -1
}

// ownsQueue says req came on the subject of partition queueID: its owner answers a queue it
// does not have as one without a message yet.
func ownsQueue(req micro.Request, queueID int32) bool {
	p := servedPartition(req)
	return p >= 0 && int32(p) == queueID
}

// handleOffsetForTime answers offset_for_time on a partition's subject: 0 for the owner's
// queue that has no message yet.
func (s *Service) handleOffsetForTime(req micro.Request) {
	s.inline(func(data []byte) ([]byte, error) {
		out, err := s.offsetForTime(data)
		if err != nil && errors.Is(err, reader.ErrUnknownQueue) {
			if r, derr := decodeOffsetForTime(data); derr == nil && ownsQueue(req, r.QueueID) {
				return marshal(api.OffsetForTimeReply{Offset: 0})
			}
		}
		return out, err
	})(req)
}

func (r msgRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	out := &nats.Msg{Data: data}
	for _, o := range opts {
		o(out)
	}
	return r.m.RespondMsg(out)
}

func (r msgRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	data, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return r.Respond(data, opts...)
}

func (r msgRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	out := &nats.Msg{Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}}
	for _, o := range opts {
		o(out)
	}
	out.Data = data
	return r.m.RespondMsg(out)
}

func (r msgRequest) Data() []byte           { return r.m.Data }
func (r msgRequest) Headers() micro.Headers { return micro.Headers(r.m.Header) }
func (r msgRequest) Subject() string        { return r.m.Subject }
func (r msgRequest) Reply() string          { return r.m.Reply }

// formatPartitions writes a partition set as comma-separated numbers.
func formatPartitions(ps []int) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}
