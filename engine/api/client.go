package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultTimeout bounds a Client request whose ctx has no deadline (a get's WaitMs is added).
const DefaultTimeout = 5 * time.Second

// Client calls the read API over a NATS connection. It is safe for concurrent use; it owns
// nothing (closing the connection is the caller's business).
//
// Every method takes its timeout from ctx; when ctx has no deadline, DefaultTimeout (or
// WithTimeout's) applies, plus the wait of a long-polling Get. A server's error reply is
// returned as *Error (see CodeOf); no engine answering on the subject wraps nats.ErrNoResponders.
type Client struct {
	nc         *nats.Conn
	prefix     string
	timeout    time.Duration
	partitions int // WithPartitions (partitions.go); 0: not partitioned
}

// Option configures a Client.
type Option func(*Client)

// WithPrefix sets the subject prefix (DefaultPrefix when empty).
func WithPrefix(prefix string) Option { return func(c *Client) { c.prefix = prefix } }

// WithTimeout sets the timeout of requests whose ctx has no deadline.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// NewClient returns a client of the read API on nc.
func NewClient(nc *nats.Conn, opts ...Option) *Client {
	c := &Client{nc: nc, prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c
}

// Get reads messages of a queue (endpoint get). With WaitMs > 0, ctx's deadline (if any) must
// leave room for the wait.
func (c *Client) Get(ctx context.Context, req GetRequest) (*GetReply, error) {
	var out GetReply
	wait := time.Duration(min(max(req.WaitMs, 0), MaxWaitMs)) * time.Millisecond
	if err := c.requestTo(ctx, c.queueSubject(EndpointGet, req.QueueID), wait, req, &out); err != nil {
		return &out, err
	}
	if c.partitions > 0 && out.Status == StatusOffsetTooSmall && req.Offset < out.NextOffset {
		// Below where the queue starts on its owner: the history before a handoff, on a former
		// owner (partitions.go).
		if h, ok := c.getHistory(ctx, req); ok {
			return h, nil
		}
	}
	return &out, nil
}

// Msg reads one message by its offset message id (endpoint msg); req may select a body range.
func (c *Client) Msg(ctx context.Context, req MsgRequest) (*Message, error) {
	var out Message
	return &out, c.request(ctx, EndpointMsg, 0, req, &out)
}

// Body reads the whole body of the message msgID, in as many msg range reads as it takes (for
// bodies too large for one reply; see Message.Partial).
func (c *Client) Body(ctx context.Context, msgID string) ([]byte, error) {
	var body []byte
	for off := 0; ; {
		m, err := c.Msg(ctx, MsgRequest{MsgID: msgID, BodyOffset: off})
		if err != nil {
			return nil, err
		}
		if body == nil {
			body = make([]byte, 0, m.BodySize)
		}
		if m.BodyOffset != off || (len(m.Body) == 0 && off < m.BodySize) {
			return nil, fmt.Errorf("api: body of %s: asked from byte %d, got %d bytes from %d of %d",
				msgID, off, len(m.Body), m.BodyOffset, m.BodySize)
		}
		body = append(body, m.Body...)
		off += len(m.Body)
		if off >= m.BodySize {
			return body, nil
		}
	}
}

// Query finds messages by key (endpoint query), newest first.
func (c *Client) Query(ctx context.Context, req QueryRequest) (*QueryReply, error) {
	var out QueryReply
	return &out, c.request(ctx, EndpointQuery, 0, req, &out)
}

// OffsetForTime returns the first queue offset stored at or after req.Timestamp.
func (c *Client) OffsetForTime(ctx context.Context, req OffsetForTimeRequest) (int64, error) {
	var out OffsetForTimeReply
	if err := c.requestTo(ctx, c.queueSubject(EndpointOffsetForTime, req.QueueID), 0, req, &out); err != nil {
		return 0, err
	}
	return out.Offset, nil
}

// Offsets returns the bounds of every queue of topic.
func (c *Client) Offsets(ctx context.Context, topic string) (*OffsetsReply, error) {
	var out OffsetsReply
	return &out, c.request(ctx, EndpointOffsets, 0, OffsetsRequest{Topic: topic}, &out)
}

// Topics lists topics after req.After; Truncated says more follow.
func (c *Client) Topics(ctx context.Context, req TopicsRequest) (*TopicsReply, error) {
	var out TopicsReply
	return &out, c.request(ctx, EndpointTopics, 0, req, &out)
}

// AllTopics lists every topic, asking page after page.
func (c *Client) AllTopics(ctx context.Context) ([]TopicInfo, error) {
	var all []TopicInfo
	after := ""
	for {
		page, err := c.Topics(ctx, TopicsRequest{After: after})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Topics...)
		if !page.Truncated || len(page.Topics) == 0 {
			return all, nil
		}
		after = page.Topics[len(page.Topics)-1].Name
	}
}

// Commit records a consumer group's offset in a queue.
func (c *Client) Commit(ctx context.Context, req CommitRequest) error {
	var out CommitReply
	return c.request(ctx, EndpointCommit, 0, req, &out)
}

// Fetch returns a consumer group's committed offset in a queue, and whether there is one.
func (c *Client) Fetch(ctx context.Context, req FetchRequest) (int64, bool, error) {
	var out FetchReply
	if err := c.request(ctx, EndpointFetch, 0, req, &out); err != nil {
		return 0, false, err
	}
	return out.Offset, out.Found, nil
}

// Replay starts a replay and returns its plan; the messages then arrive on req.Subject, the
// last one marked (ParseReplayEnd). Subscribe to the subject before calling Replay.
func (c *Client) Replay(ctx context.Context, req ReplayRequest) (*ReplayReply, error) {
	var out ReplayReply
	return &out, c.request(ctx, EndpointReplay, 0, req, &out)
}

// request sends req as JSON to the endpoint and decodes the reply into out.
func (c *Client) request(ctx context.Context, endpoint string, extra time.Duration, req, out any) error {
	return c.requestTo(ctx, Subject(c.prefix, endpoint), extra, req, out)
}

// requestTo is request on a given subject.
func (c *Client) requestTo(ctx context.Context, subject string, extra time.Duration, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("api: %s: %w", subject, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+extra)
		defer cancel()
	}
	m, err := c.nc.RequestWithContext(ctx, subject, data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("api: %s: no engine answers (is its read API on, with the prefix %q?): %w",
			subject, c.prefix, err)
	case err != nil:
		return fmt.Errorf("api: %s: %w", subject, err)
	}
	return decodeReply(m, out)
}
