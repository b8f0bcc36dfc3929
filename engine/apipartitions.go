package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/stages/ingress"
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

// addPartitionEndpoints registers the per-partition and the fan-out endpoints of parts.
func (s *apiService) addPartitionEndpoints(svc micro.Service, parts *ingress.Partitions) error {
	handlers := map[string]micro.HandlerFunc{
		api.EndpointGet: s.handleGet, api.EndpointPull: s.handlePull,
		api.EndpointOffsetForTime: s.inline(s.offsetForTime), api.EndpointQuery: s.inline(s.query),
	}
	for _, p := range parts.Owned {
		for _, name := range partitionEndpoints {
			subject := api.PartitionSubject(s.prefix, p, name)
			if err := svc.AddEndpoint(fmt.Sprintf("p%d_%s", p, name), handlers[name], micro.WithEndpointSubject(subject),
				micro.WithEndpointMetadata(map[string]string{"description": fmt.Sprintf("%s, partition %d", name, p)})); err != nil {
				return fmt.Errorf("read API: endpoint %s: %w", subject, err)
			}
		}
	}
	covered := micro.Headers{
		api.HeaderPartitions:     {formatPartitions(parts.Owned)},
		api.HeaderPartitionCount: {strconv.Itoa(parts.Count)},
	}
	g := svc.AddGroup(s.prefix+"."+api.FanOutToken, micro.WithGroupQueueGroupDisabled())
	for _, ep := range []struct {
		name string
		op   func([]byte) ([]byte, error)
		// empty is the answer of an engine that does not have the topic: its partitions hold
		// nothing of it, which is an answer, not an error.
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
	} {
		h := micro.HandlerFunc(func(req micro.Request) {
			if !s.enter() {
				s.respondCovered(req, nil, errShuttingDown, covered)
				return
			}
			defer s.leave()
			out, err := ep.op(req.Data())
			if err != nil && ep.empty != nil && errors.Is(err, ErrNotFound) {
				out, err = ep.empty(req.Data())
			}
			s.respondCovered(req, out, err, covered)
		})
		if err := g.AddEndpoint(ep.name, h, micro.WithEndpointMetadata(map[string]string{
			"description": ep.name + " of this engine's partitions (fan-out: every engine answers)"})); err != nil {
			return fmt.Errorf("read API: fan-out endpoint %s: %w", ep.name, err)
		}
	}
	return nil
}

// respondCovered is respond with the headers that say which partitions the answer covers (an
// error answer too: the gatherer then knows whose partitions failed).
func (s *apiService) respondCovered(req micro.Request, out []byte, err error, covered micro.Headers) {
	if err != nil {
		code := apiCode(err)
		s.logRefused(req.Subject(), code, err)
		body, _ := json.Marshal(api.ErrorReply{Error: &api.Error{Code: code, Description: err.Error()}})
		if rerr := req.Error(strconv.Itoa(code), err.Error(), body, micro.WithHeaders(covered)); rerr != nil {
			s.log.Debug().Err(rerr).Str("subject", req.Subject()).Msg("read API: could not reply")
		}
		return
	}
	if rerr := req.Respond(out, micro.WithHeaders(covered)); rerr != nil {
		s.log.Warn().Err(rerr).Str("subject", req.Subject()).Int("bytes", len(out)).Msg("read API: could not reply")
	}
}

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
