package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// onlineSource asks a running engine through the read API.
type onlineSource struct {
	nc         *nats.Conn
	c          *api.Client
	url        string
	prefix     string
	partitions int // > 0: partitioned engines (fan-out reads)
}

func (s *onlineSource) where() string {
	if s.partitions > 0 {
		return "the engines reached through " + s.url
	}
	return "engine at " + s.url
}

func (s *onlineSource) close() error {
	s.nc.Close()
	return nil
}

func (s *onlineSource) explain(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		prefix := ""
		if s.prefix != api.DefaultPrefix {
			prefix = fmt.Sprintf(", with --api-prefix %q", s.prefix)
		}
		return fmt.Errorf("no engine answers at %s (is it running with the read API on%s?)", s.url, prefix)
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the engine at %s did not answer in time (--timeout): %w", s.url, err)
	case api.CodeOf(err) == api.CodeNotImplemented:
		return fmt.Errorf("the engine at %s keeps no message index (it runs with --no-index): query needs it", s.url)
	case api.CodeOf(err) == api.CodeUnavailable:
		return fmt.Errorf("the engine at %s is shutting down: %w", s.url, err)
	}
	return err
}

// notAPI is the error for a reply that is not the read API's: something else answers on the
// endpoint's subject (typically an engine storing that subject, which acked the request as a
// message to store, because no engine serves the API under this prefix).
func (s *onlineSource) notAPI(endpoint string) error {
	return fmt.Errorf("no engine serves the read API with the prefix %q at %s: the reply on %s is not the API's "+
		"(if an engine stores that subject, it has just stored the request as a message); check --api-prefix",
		s.prefix, s.url, api.Subject(s.prefix, endpoint))
}

// unknownIfInvalid answers for a name no topic can have as the offline reader does (no such
// topic), where the API refuses it as a bad request: so that the CLI explains it the same way
// online and offline, with the topic a subject maps to.
func unknownIfInvalid(topic string) error {
	if err := commitlog.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %v", reader.ErrUnknownQueue, err)
	}
	return nil
}

func (s *onlineSource) get(ctx context.Context, req api.GetRequest) (*api.GetReply, error) {
	if err := unknownIfInvalid(req.Topic); err != nil {
		return nil, err
	}
	rep, err := s.c.Get(ctx, req)
	if err != nil {
		return nil, err
	}
	if rep.Status == "" {
		return nil, s.notAPI(api.EndpointGet)
	}
	if s.partitions > 0 && rep.Status == api.StatusNoMessageInQueue {
		// The owner answers a queue it does not have as empty: a queue of a topic that no
		// engine has is a mistake to say so, not an empty queue.
		if _, err := s.offsets(ctx, req.Topic); isUnknownQueue(err) {
			return nil, err
		}
	}
	return rep, s.wholeBodies(ctx, rep.Messages)
}

// wholeBodies reads the bodies a reply left out (too large for one reply) in msg ranges.
func (s *onlineSource) wholeBodies(ctx context.Context, msgs []api.Message) error {
	for i := range msgs {
		m := &msgs[i]
		if !m.Partial && m.BodyOffset == 0 && len(m.Body) == m.BodySize {
			continue
		}
		body, err := s.c.Body(ctx, m.MsgID)
		if err != nil {
			return fmt.Errorf("read the body of %s: %w", m.MsgID, err)
		}
		m.Body, m.BodyOffset, m.Partial = body, 0, false
	}
	return nil
}

func (s *onlineSource) msg(ctx context.Context, msgID string) (api.Message, error) {
	m, err := s.c.Msg(ctx, api.MsgRequest{MsgID: msgID})
	if err != nil {
		return api.Message{}, err
	}
	if m.MsgID == "" || m.Properties == nil { // the API always sends the properties, an ack has none
		return api.Message{}, s.notAPI(api.EndpointMsg)
	}
	msgs := []api.Message{*m}
	if err := s.wholeBodies(ctx, msgs); err != nil {
		return api.Message{}, err
	}
	return msgs[0], nil
}

func (s *onlineSource) query(ctx context.Context, req api.QueryRequest) (*api.QueryReply, error) {
	if err := unknownIfInvalid(req.Topic); err != nil {
		return nil, err
	}
	query := s.c.Query
	if s.partitions > 0 {
		query = s.c.QueryAll
	}
	rep, err := query(ctx, req)
	if err != nil {
		return nil, err
	}
	if rep.Messages == nil { // the API always sends the list, empty or not
		return nil, s.notAPI(api.EndpointQuery)
	}
	return rep, s.wholeBodies(ctx, rep.Messages)
}

func (s *onlineSource) offsets(ctx context.Context, topic string) ([]api.QueueOffsets, error) {
	if err := unknownIfInvalid(topic); err != nil {
		return nil, err
	}
	offsets := s.c.Offsets
	if s.partitions > 0 {
		offsets = s.c.OffsetsAll
	}
	rep, err := offsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if rep.Topic != topic {
		return nil, s.notAPI(api.EndpointOffsets)
	}
	if s.partitions > 0 && len(rep.Queues) == 0 {
		// Every partition answered and none holds a queue of the topic (api.Client.OffsetsAll).
		return nil, fmt.Errorf("%w: no engine has topic %q", reader.ErrUnknownQueue, topic)
	}
	return rep.Queues, nil
}

func (s *onlineSource) offsetForTime(ctx context.Context, topic string, queueID int32, ms int64) (int64, error) {
	if err := unknownIfInvalid(topic); err != nil {
		return 0, err
	}
	return s.c.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: topic, QueueID: queueID, Timestamp: ms})
}

func (s *onlineSource) topics(ctx context.Context) ([]api.TopicInfo, error) {
	if s.partitions > 0 {
		var all []api.TopicInfo
		req := api.TopicsRequest{}
		for {
			page, err := s.c.TopicsAll(ctx, req)
			if err != nil {
				return nil, err
			}
			all = append(all, page.Topics...)
			if !page.Truncated || len(page.Topics) == 0 {
				return all, nil
			}
			req.After = page.Topics[len(page.Topics)-1].Name
		}
	}
	// The first page by hand: the API always sends the list, empty or not.
	first, err := s.c.Topics(ctx, api.TopicsRequest{})
	if err != nil {
		return nil, err
	}
	if first.Topics == nil {
		return nil, s.notAPI(api.EndpointTopics)
	}
	if !first.Truncated || len(first.Topics) == 0 {
		return first.Topics, nil
	}
	return s.c.AllTopics(ctx)
}
