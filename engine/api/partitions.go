package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Reads under partitioned ingest (docs/SCALE-OUT.md, "Reads"): a queue is a partition, stored by
// its owner only.
//
//   - Queue-addressed requests go to the owner: with WithPartitions, Get, Pull and OffsetForTime
//     use the queue's partition subject, <prefix>.p.<queue>.<endpoint>, to which only the
//     partition's owner subscribes; QueryKey sends a query to the owner of the key's partition.
//   - Queries over every partition fan out: QueryAll, OffsetsAll and TopicsAll send to
//     <prefix>.all.<endpoint>, which every engine answers, each saying which partitions its answer
//     covers (HeaderPartitions, HeaderPartitionCount). The client gathers until every partition
//     is covered or the deadline passes; a gathered answer that misses partitions comes with a
//     *PartialError naming them: never silently short.
//   - A partition whose owner has no message of a topic is an empty queue of it, not an unknown
//     one: on the partition's subjects get and pull answer NO_MESSAGE_IN_QUEUE at offset 0 (a
//     long poll waits for the first message) and offset_for_time 0; a fan-out answer covers the
//     partition without listing it, and OffsetsAll and OffsetsForTimeAll list it at 0. A topic
//     that no answer lists is one no engine has: they return no queue at all.

// Headers of a fan-out answer.
const (
	// HeaderPartitions lists the partitions an answer covers: comma-separated numbers.
	HeaderPartitions = "Rs-Partitions"
	// HeaderPartitionCount is P, the partition count of the answering engine.
	HeaderPartitionCount = "Rs-Partition-Count"
)

// FanOutToken is the subject token of the fan-out endpoints: <prefix>.all.<endpoint>.
const FanOutToken = "all"

// PartitionSubject is the subject of endpoint for partition p: <prefix>.p.<p>.<endpoint>.
func PartitionSubject(prefix string, p int, endpoint string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return strings.TrimSuffix(prefix, ".") + ".p." + strconv.Itoa(p) + "." + endpoint
}

// PartitionOf is the partition of a key among count: FNV-1a (32 bits) mod count, as nats-server's
// {{partition(count, ...)}} mapping computes it (route.PartitionOf; a test holds the two
// together).
func PartitionOf(key string, count int) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(count))
}

// WithPartitions tells the client that the engines partition every topic into count partitions
// (their --partitions): queue-addressed requests then go to the queue's owner.
func WithPartitions(count int) Option { return func(c *Client) { c.partitions = count } }

// queueSubject is the subject of a request for a queue: its partition's when the client knows
// the partitioning, the shared one otherwise.
func (c *Client) queueSubject(endpoint string, queue int32) string {
	if c.partitions > 0 && queue >= 0 && int(queue) < c.partitions {
		return PartitionSubject(c.prefix, int(queue), endpoint)
	}
	return Subject(c.prefix, endpoint)
}

// QueryKey queries the owner of key's partition for the messages of req.Topic with req.Key,
// when the topic's messages are partitioned by key (the key tokens of their subjects, which the
// publisher should also send as a key so that the index finds them). It needs WithPartitions.
func (c *Client) QueryKey(ctx context.Context, key string, req QueryRequest) (*QueryReply, error) {
	if c.partitions <= 0 {
		return nil, errors.New("api: QueryKey needs WithPartitions")
	}
	var out QueryReply
	subject := PartitionSubject(c.prefix, PartitionOf(key, c.partitions), EndpointQuery)
	return &out, c.requestTo(ctx, subject, 0, req, &out)
}

// PartialError is a fan-out answer that does not cover every partition: the engines owning
// Missing did not answer by the deadline (or answered with an error: Errors). The partial result
// is returned with it.
type PartialError struct {
	Count   int   // P
	Missing []int // the partitions not covered, ascending
	Errors  []error
}

func (e *PartialError) Error() string {
	s := fmt.Sprintf("api: partial answer: %d of %d partitions missing %v", len(e.Missing), e.Count, e.Missing)
	if len(e.Errors) > 0 {
		s += fmt.Sprintf(" (errors: %v)", errors.Join(e.Errors...))
	}
	return s
}

// fanOut sends req to the fan-out endpoint, every engine's, and returns the subscription its
// answers come on and ctx with the client's timeout when it had no deadline; end releases both.
func (c *Client) fanOut(ctx context.Context, endpoint string, req any) (_ *nats.Subscription, _ context.Context,
	end func(), err error) {
	subject := c.prefix + "." + FanOutToken + "." + endpoint
	defer func() {
		if err != nil {
			err = fmt.Errorf("api: %s: %w", subject, err)
		}
	}()
	data, err := json.Marshal(req)
	if err != nil {
		return nil, nil, nil, err
	}
	cancel := func() {}
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	end = func() {
		_ = sub.Unsubscribe()
		cancel()
	}
	if err := c.nc.PublishRequest(subject, inbox, data); err != nil {
		end()
		return nil, nil, nil, err
	}
	return sub, ctx, end, nil
}

// gather sends req to the fan-out endpoint and hands each answer (decoded into a fresh T) to
// each, until every partition is covered or ctx (or the client's timeout) ends.
func gather[T any](ctx context.Context, c *Client, endpoint string, req any, each func(*T)) error {
	_, err := gatherCovered(ctx, c, endpoint, req, each)
	return err
}

// gatherCovered is gather that also returns which partitions the answers covered (nil when
// no answer said).
func gatherCovered[T any](ctx context.Context, c *Client, endpoint string, req any, each func(*T)) (covered []bool, err error) {
	subject := c.prefix + "." + FanOutToken + "." + endpoint
	sub, ctx, end, err := c.fanOut(ctx, endpoint, req)
	if err != nil {
		return nil, err
	}
	defer end()
	count := c.partitions
	var (
		left    int
		errs    []error
		answers int
	)
	if count > 0 {
		covered, left = make([]bool, count), count
	}
	var waitErr error
	for count == 0 || left > 0 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			waitErr = err // the deadline: what is not covered is missing
			break
		}
		if m.Header.Get("Status") == "503" && len(m.Data) == 0 {
			return nil, fmt.Errorf("api: %s: no engine answers: %w", subject, nats.ErrNoResponders)
		}
		parts, n, ok := coveredBy(m)
		if !ok {
			errs = append(errs, fmt.Errorf("an answer without %s/%s headers (an engine without partitions?)",
				HeaderPartitions, HeaderPartitionCount))
			continue
		}
		if count == 0 {
			count = n
		}
		if n != count {
			errs = append(errs, fmt.Errorf("an engine has %d partitions, not %d: ignored", n, count))
			continue
		}
		if covered == nil {
			covered, left = make([]bool, count), count
		}
		out := new(T)
		if err := decodeReply(m, out); err != nil {
			errs = append(errs, fmt.Errorf("partitions %v: %w", parts, err))
			continue
		}
		answers++
		for _, p := range parts {
			if p >= 0 && p < count && !covered[p] {
				covered[p] = true
				left--
			}
		}
		each(out)
	}
	if count == 0 || covered == nil {
		if answers == 0 && len(errs) == 0 {
			return nil, fmt.Errorf("api: %s: no engine answered: %w", subject, waitErr)
		}
		covered, left = make([]bool, max(count, 0)), max(count, 0)
	}
	if left == 0 && count > 0 {
		return covered, nil
	}
	pe := &PartialError{Count: count, Errors: errs}
	for p, ok := range covered {
		if !ok {
			pe.Missing = append(pe.Missing, p)
		}
	}
	return covered, pe
}

// coveredBy parses a fan-out answer's partition headers.
func coveredBy(m *nats.Msg) (parts []int, count int, ok bool) {
	count, err := strconv.Atoi(m.Header.Get(HeaderPartitionCount))
	if err != nil || count <= 0 {
		return nil, 0, false
	}
	for f := range strings.SplitSeq(m.Header.Get(HeaderPartitions), ",") {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, 0, false
		}
		parts = append(parts, p)
	}
	return parts, count, true
}

// QueryAll queries every engine for the messages of req.Topic with req.Key (fan-out) and merges
// them, newest first, at most req.Max (64 when 0). A message two engines hold (a standby) is
// listed once. Missing partitions give a *PartialError with the partial result.
func (c *Client) QueryAll(ctx context.Context, req QueryRequest) (*QueryReply, error) {
	out := &QueryReply{Messages: []Message{}}
	seen := map[[2]int64]bool{}
	err := gather(ctx, c, EndpointQuery, req, func(r *QueryReply) {
		out.Truncated = out.Truncated || r.Truncated
		for _, m := range r.Messages {
			k := [2]int64{int64(m.QueueID), m.QueueOffset}
			if !seen[k] {
				seen[k] = true
				out.Messages = append(out.Messages, m)
			}
		}
	})
	slices.SortStableFunc(out.Messages, func(a, b Message) int {
		return cmp.Or(cmp.Compare(b.StoreTimestamp, a.StoreTimestamp), cmp.Compare(a.QueueID, b.QueueID),
			cmp.Compare(a.QueueOffset, b.QueueOffset))
	})
	limit := req.Max
	if limit <= 0 || limit > 64 {
		limit = 64
	}
	if len(out.Messages) > limit {
		out.Messages, out.Truncated = out.Messages[:limit], true
	}
	return out, err
}

// OffsetsAll gathers the bounds of every queue (partition) of topic from every engine, by queue
// id. A queue on several engines (history before a handoff on its former owner, or a standby)
// spans them all: the lowest minimum and the highest maximum. Every partition is a queue of
// the topic: one the answers cover that no engine holds (no message of the topic went there
// yet) is listed empty, at 0. No queue at all means that no engine has the topic.
func (c *Client) OffsetsAll(ctx context.Context, topic string) (*OffsetsReply, error) {
	out := &OffsetsReply{Topic: topic, Queues: []QueueOffsets{}}
	byQueue := map[int32]QueueOffsets{}
	covered, err := gatherCovered(ctx, c, EndpointOffsets, OffsetsRequest{Topic: topic}, func(r *OffsetsReply) {
		for _, q := range r.Queues {
			prev, ok := byQueue[q.QueueID]
			if !ok {
				byQueue[q.QueueID] = q
				continue
			}
			// A tie takes the store time an empty queue (an owner's start) does not have.
			if q.MinOffset < prev.MinOffset || (q.MinOffset == prev.MinOffset && prev.MinStoreTime == 0) {
				prev.MinOffset, prev.MinStoreTime = q.MinOffset, q.MinStoreTime
			}
			if q.MaxOffset > prev.MaxOffset || (q.MaxOffset == prev.MaxOffset && prev.MaxStoreTime == 0) {
				prev.MaxOffset, prev.MaxStoreTime = q.MaxOffset, q.MaxStoreTime
			}
			byQueue[q.QueueID] = prev
		}
	})
	for p := range emptyPartitions(covered, len(byQueue) > 0, func(p int32) bool { _, ok := byQueue[p]; return ok }) {
		byQueue[p] = QueueOffsets{QueueID: p}
	}
	for _, q := range byQueue {
		out.Queues = append(out.Queues, q)
	}
	slices.SortFunc(out.Queues, func(a, b QueueOffsets) int { return cmp.Compare(a.QueueID, b.QueueID) })
	return out, err
}

// emptyPartitions yields the partitions that the answers covered and none listed (has), when
// the topic is known at all: those hold no message of it yet.
func emptyPartitions(covered []bool, known bool, has func(int32) bool) iter.Seq[int32] {
	return func(yield func(int32) bool) {
		if !known {
			return
		}
		for p, ok := range covered {
			if ok && !has(int32(p)) && !yield(int32(p)) {
				return
			}
		}
	}
}

// TopicsAll gathers the topics of every engine, with the union of their queues. When an engine's
// answer is truncated, the merged list stops at the first name any truncated answer stopped at
// (Truncated: ask again with After set to the last name).
func (c *Client) TopicsAll(ctx context.Context, req TopicsRequest) (*TopicsReply, error) {
	queues := map[string][]int32{}
	cut := ""
	err := gather(ctx, c, EndpointTopics, req, func(r *TopicsReply) {
		for _, t := range r.Topics {
			queues[t.Name] = append(queues[t.Name], t.Queues...)
		}
		if r.Truncated && len(r.Topics) > 0 {
			if last := r.Topics[len(r.Topics)-1].Name; cut == "" || last < cut {
				cut = last
			}
		}
	})
	out := &TopicsReply{Topics: []TopicInfo{}, Truncated: cut != ""}
	for name, qs := range queues {
		if cut != "" && name > cut {
			continue
		}
		out.Topics = append(out.Topics, TopicInfo{Name: name, Queues: slices.Compact(slices.Sorted(slices.Values(qs)))})
	}
	slices.SortFunc(out.Topics, func(a, b TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// historyStall is how long getHistory waits for one more answer before it concludes that no
// engine holds the offset (retention removed it).
const historyStall = 250 * time.Millisecond

// getHistory asks every engine (fan-out get) for req, below where the queue starts on its
// current owner: the first answer that found messages wins. ok is false when none did.
func (c *Client) getHistory(ctx context.Context, req GetRequest) (*GetReply, bool) {
	req.WaitMs = 0
	sub, ctx, end, err := c.fanOut(ctx, EndpointGet, req)
	if err != nil {
		return nil, false
	}
	defer end()
	for {
		sctx, cancel := context.WithTimeout(ctx, historyStall)
		m, err := sub.NextMsgWithContext(sctx)
		cancel()
		if err != nil {
			return nil, false
		}
		var out GetReply
		if decodeReply(m, &out) == nil && out.Status == StatusFound {
			return &out, true
		}
	}
}

// EndpointOffsetsForTime is the fan-out endpoint that answers, for every queue of a topic an
// engine holds, the first offset stored at or after a time (Kafka's offsetsForTimes): where to
// start reading every partition from a moment on.
const EndpointOffsetsForTime = "offsets_for_time"

// OffsetsForTimeRequest asks for the offsets of Topic's queues at Timestamp (ms).
type OffsetsForTimeRequest struct {
	Topic     string `json:"topic"`
	Timestamp int64  `json:"timestamp"`
}

// OffsetsForTimeReply lists them by queue id.
type OffsetsForTimeReply struct {
	Topic  string          `json:"topic"`
	Queues []QueueOffsetAt `json:"queues"`
}

// QueueOffsetAt is a queue's first offset stored at or after the time asked (its max offset when
// every message is older, its min when none is).
type QueueOffsetAt struct {
	QueueID int32 `json:"queueId"`
	Offset  int64 `json:"offset"`
}

// OffsetsForTimeAll gathers, from every engine, the offset of every queue (partition) of topic
// at ts (ms). A queue on several engines (history before a handoff) takes the lowest answer:
// the old holder answers its end when all it holds is older. A partition no engine holds is at
// 0, as in OffsetsAll; no queue at all means that no engine has the topic.
func (c *Client) OffsetsForTimeAll(ctx context.Context, topic string, ts int64) (*OffsetsForTimeReply, error) {
	byQueue := map[int32]int64{}
	covered, err := gatherCovered(ctx, c, EndpointOffsetsForTime, OffsetsForTimeRequest{Topic: topic, Timestamp: ts}, func(r *OffsetsForTimeReply) {
		for _, q := range r.Queues {
			if prev, ok := byQueue[q.QueueID]; !ok || q.Offset < prev {
				byQueue[q.QueueID] = q.Offset
			}
		}
	})
	for p := range emptyPartitions(covered, len(byQueue) > 0, func(p int32) bool { _, ok := byQueue[p]; return ok }) {
		byQueue[p] = 0
	}
	out := &OffsetsForTimeReply{Topic: topic, Queues: []QueueOffsetAt{}}
	for q, off := range byQueue {
		out.Queues = append(out.Queues, QueueOffsetAt{QueueID: q, Offset: off})
	}
	slices.SortFunc(out.Queues, func(a, b QueueOffsetAt) int { return cmp.Compare(a.QueueID, b.QueueID) })
	return out, err
}
