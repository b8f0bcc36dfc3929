package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress"
)

// Defaults of the read API's bounds (NATSOptions).
const (
	// DefaultMaxLongPolls bounds the gets waiting at the head of a queue at once. Each holds a
	// goroutine and, once woken, one reply (at most the connection's max payload).
	DefaultMaxLongPolls = 128
	// DefaultMaxReplays bounds the replays running at once.
	DefaultMaxReplays = 4
	// DefaultVersion is the version the micro service shows when NATSOptions.Version is empty.
	DefaultVersion = "0.0.0-dev"
)

// envelopeRoom is what a reply keeps for everything but its messages (status, offsets, flags,
// brackets): its fields take under 200 bytes.
const envelopeRoom = 512

var errShuttingDown = errors.New("engine: read API shutting down")

// apiService serves the read API (package engine/api) on the engine's connection as the micro
// service "rocketstore": one endpoint per operation under the prefix.
//
// Concurrency. micro runs each endpoint's handler on that endpoint's subscription goroutine, so
// a slow request delays only requests to the same endpoint. A get that asks to wait would hold
// every later get behind it, so long polls run on goroutines of their own, at most MaxLongPolls
// (a semaphore; when it is full the get is answered at once, with WaitSkipped). Replays run on
// goroutines too, at most MaxReplays (when full: 429). Everything else answers inline.
//
// Shutdown (stop, called by Server before the engine closes): the service stops (its
// subscriptions drain), then the gate closes: a handler that starts afterwards answers 503 and
// touches nothing; then ctx is cancelled, which ends long polls (503) and replays (their end
// message says why), and stop waits for every handler, long poll and replay under way. Only then
// may the engine close, so no handler ever reads a closed store.
//
// Bounds. No reply exceeds the connection's max payload: a get's maxBytes is lowered to what can
// fit once base64 (4/3) is counted, every message is encoded and measured, and the reply stops
// before the message that would not fit (Truncated; NextOffset is that message's offset). A
// message too large for any reply is sent without its body (Partial), which msg serves in ranges.
type apiService struct {
	e      *Engine
	nc     *nats.Conn
	svc    micro.Service
	prefix string
	log    zerolog.Logger
	keys   string // the ingress keys and tags headers, for replays
	tags   string

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc

	polls   chan struct{} // a slot per long poll running
	replays chan struct{} // a slot per replay running

	mu       sync.Mutex
	stopping bool           // guarded by mu
	inflight sync.WaitGroup // handlers, long polls and replays under way; Add under mu

	// Test hooks (atomic: tests set them while the service runs): polling is called by a long
	// poll's goroutine just before it calls Engine.Get; replayFull is passed to replays as
	// onWindowFull.
	polling    atomic.Pointer[func()]
	replayFull atomic.Pointer[func()]
}

func (s *apiService) setPolling(f func())    { s.polling.Store(&f) }
func (s *apiService) setReplayFull(f func()) { s.replayFull.Store(&f) }

// hook is the function a test hook holds, nil when unset.
func hook(p *atomic.Pointer[func()]) func() {
	if f := p.Load(); f != nil {
		return *f
	}
	return nil
}

// startAPI registers the micro service and its endpoints on nc.
func startAPI(e *Engine, nc *nats.Conn, nopts NATSOptions, log zerolog.Logger) (*apiService, error) {
	s := &apiService{
		e: e, nc: nc, prefix: strings.TrimSuffix(cmpOr(nopts.APIPrefix, api.DefaultPrefix), "."),
		log:  log.With().Str("stage", "api").Logger(),
		keys: cmpOr(nopts.KeysHeader, ingress.DefaultKeysHeader), tags: cmpOr(nopts.TagsHeader, ingress.DefaultTagsHeader),
		polls:   make(chan struct{}, cmpOrInt(nopts.MaxLongPolls, DefaultMaxLongPolls)),
		replays: make(chan struct{}, cmpOrInt(nopts.MaxReplays, DefaultMaxReplays)),
	}
	if !validPublishSubject(s.prefix) {
		return nil, fmt.Errorf("read API: prefix %q is not a subject without wildcards", s.prefix)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.ctx, s.cancel = ctx, func() { cancel(errShuttingDown) }
	version, meta := serviceVersion(nopts.Version)
	o := e.opts
	meta["store_dir"] = o.Dir
	meta["flush_mode"] = o.FlushMode.String()
	meta["store_host"] = o.StoreHost.String()
	meta["api_prefix"] = s.prefix
	meta["index"] = strconv.FormatBool(!o.NoIndex)
	svc, err := micro.AddService(nc, micro.Config{
		Name:    api.ServiceName,
		Version: version,
		Description: "RocketStore engine: NATS messages in a RocketMQ store; read API " +
			"(get, msg, query, offset_for_time, offsets, topics, commit, fetch, replay)",
		Metadata: meta,
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.log.Warn().Str("subject", err.Subject).Str("error", err.Description).Msg("read API subscription error")
		},
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("read API: %w", err)
	}
	s.svc = svc
	g := svc.AddGroup(s.prefix)
	endpoints := []struct {
		name, doc string
		h         micro.HandlerFunc
	}{
		{api.EndpointGet, "messages of a queue from an offset; waitMs long-polls", s.handleGet},
		{api.EndpointMsg, "one message by offset message id; body ranges", s.inline(s.msg)},
		{api.EndpointQuery, "messages by key in a store-time range", s.inline(s.query)},
		{api.EndpointOffsetForTime, "first queue offset stored at or after a time", s.inline(s.offsetForTime)},
		{api.EndpointOffsets, "min/max offsets of a topic's queues", s.inline(s.offsets)},
		{api.EndpointTopics, "topics and their queues", s.inline(s.topics)},
		{api.EndpointCommit, "commit a consumer group's offset", s.inline(s.commit)},
		{api.EndpointFetch, "fetch a consumer group's offset", s.inline(s.fetch)},
		{api.EndpointReplay, "send a topic onto a subject, acked or paced", s.handleReplay},
	}
	for _, ep := range endpoints {
		if err := g.AddEndpoint(ep.name, ep.h, micro.WithEndpointMetadata(map[string]string{"description": ep.doc})); err != nil {
			s.stop()
			return nil, fmt.Errorf("read API: endpoint %s: %w", ep.name, err)
		}
	}
	return s, nil
}

func cmpOrInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// semVer is semver.org's regular expression, which micro requires of a service version.
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// serviceVersion is v (without a leading "v") when it is semver, else 0.0.0-<v> or 0.0.0; the
// metadata keeps v as given under "version".
func serviceVersion(v string) (string, map[string]string) {
	meta := map[string]string{}
	if v == "" {
		return DefaultVersion, meta
	}
	meta["version"] = v
	if t := strings.TrimPrefix(v, "v"); semVer.MatchString(t) {
		return t, meta
	}
	if t := "0.0.0-" + v; semVer.MatchString(t) {
		return t, meta
	}
	return "0.0.0", meta
}

// stop stops the service and waits for every request under way (see apiService). Idempotent.
func (s *apiService) stop() {
	if s.svc != nil {
		if err := s.svc.Stop(); err != nil {
			s.log.Warn().Err(err).Msg("read API: stopping the service")
		}
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.cancel()
	s.inflight.Wait()
}

// enter admits a request while the service runs; leave must follow.
func (s *apiService) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *apiService) leave() { s.inflight.Done() }

// inline makes a handler of an operation answered on the endpoint's goroutine.
func (s *apiService) inline(op func(data []byte) ([]byte, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		if !s.enter() {
			s.respond(req, nil, errShuttingDown)
			return
		}
		defer s.leave()
		out, err := op(req.Data())
		s.respond(req, out, err)
	}
}

// respond sends out, or the error reply for err.
func (s *apiService) respond(req micro.Request, out []byte, err error) {
	if err != nil {
		code := apiCode(err)
		body, _ := json.Marshal(api.ErrorReply{Error: &api.Error{Code: code, Description: err.Error()}})
		if rerr := req.Error(strconv.Itoa(code), err.Error(), body); rerr != nil {
			s.log.Debug().Err(rerr).Str("subject", req.Subject()).Msg("read API: could not reply")
		}
		return
	}
	if rerr := req.Respond(out); rerr != nil {
		s.log.Warn().Err(rerr).Str("subject", req.Subject()).Int("bytes", len(out)).Msg("read API: could not reply")
	}
}

// reply is respond for a request whose handler has returned (a long poll): micro's Request may
// not be used then (micro reads its state once the handler returns), so the reply goes out on
// the connection directly, with the same headers as micro's errors.
func (s *apiService) reply(subject string, out []byte, err error) {
	msg := &nats.Msg{Subject: subject, Data: out}
	if err != nil {
		code := apiCode(err)
		msg.Data, _ = json.Marshal(api.ErrorReply{Error: &api.Error{Code: code, Description: err.Error()}})
		msg.Header = nats.Header{}
		msg.Header.Set(micro.ErrorHeader, err.Error())
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
	}
	if perr := s.nc.PublishMsg(msg); perr != nil {
		s.log.Warn().Err(perr).Str("subject", subject).Int("bytes", len(msg.Data)).Msg("read API: could not reply")
	}
}

// badRequest is a request the API refuses (400).
type badRequest struct{ err error }

func (b badRequest) Error() string { return "bad request: " + b.err.Error() }
func (b badRequest) Unwrap() error { return b.err }

// apiCode maps an error to its reply code (see the engine/api package doc).
func apiCode(err error) int {
	var br badRequest
	switch {
	case errors.As(err, &br), errors.Is(err, ErrBadMsgID), errors.Is(err, ErrInvalidGroup),
		errors.Is(err, reader.ErrInvalidRequest), errors.Is(err, commitlog.ErrInvalidTopic):
		return api.CodeBadRequest
	case errors.Is(err, ErrUnknownQueue), errors.Is(err, ErrNotFound):
		return api.CodeNotFound
	case errors.Is(err, errTooManyReplays):
		return api.CodeTooManyReplays
	case errors.Is(err, ErrIndexDisabled):
		return api.CodeNotImplemented
	case errors.Is(err, ErrClosed), errors.Is(err, reader.ErrClosed), errors.Is(err, stages.ErrClosed),
		errors.Is(err, errShuttingDown), errors.Is(err, context.Canceled):
		return api.CodeUnavailable
	}
	return api.CodeInternal
}

// decodeRequest decodes a JSON request strictly: unknown fields are refused (a misspelt field,
// "queue" for "queueId", would otherwise silently read queue 0; field names match without
// regard to case, as encoding/json does). An empty body is the zero request.
func decodeRequest(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest{fmt.Errorf("malformed JSON: %w", err)}
	}
	if dec.More() {
		return badRequest{errors.New("malformed JSON: data after the request")}
	}
	return nil
}

// marshal is json.Marshal without HTML escaping (<, >, & stay as they are: smaller replies).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// replyLimit is the most a reply may hold: the connection's max payload (the server's, learnt
// at connect; it can change with a reconnect, so it is read per request).
func (s *apiService) replyLimit() int { return int(s.nc.MaxPayload()) }

// wireMessage is m on the wire, with its body unless noBody.
func wireMessage(m *ReadMessage, noBody bool) api.Message {
	w := api.Message{
		Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, CommitLogOffset: m.PhysicalOffset,
		Size: m.Size, MsgID: m.MsgID, StoreTimestamp: m.StoreTimestamp, BornTimestamp: m.BornTimestamp,
		BornHost: hostString(m.BornHost), StoreHost: hostString(m.StoreHost),
		Tags: m.Tags, Keys: m.Keys, UniqKey: m.UniqKey, Properties: m.Properties,
		Body: m.Body, BodySize: len(m.Body),
	}
	if w.Properties == nil {
		w.Properties = commitlog.Properties(m.RawProperties).Map()
	}
	if w.Body == nil {
		w.Body = []byte{}
	}
	if noBody {
		w.Body, w.Partial = []byte{}, len(m.Body) > 0
	}
	return w
}

func hostString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// messageList encodes msgs, in order, into a JSON array that fits in room bytes, measuring
// each. A message too large for any reply (more than perMsg bytes) is encoded without its body.
// It returns the array and how many messages it holds.
func messageList(msgs []ReadMessage, room, perMsg int) ([]byte, int, error) {
	out := append(make([]byte, 0, min(room, 64<<10)), '[')
	n := 0
	for i := range msgs {
		raw, err := marshal(wireMessage(&msgs[i], false))
		if err == nil && len(raw) > perMsg {
			raw, err = marshal(wireMessage(&msgs[i], true))
			if err == nil && len(raw) > perMsg {
				err = fmt.Errorf("message %s: %d bytes without its body, more than a reply may hold (%d): "+
					"raise the server's max_payload", msgs[i].MsgID, len(raw), perMsg)
			}
		}
		if err != nil {
			return nil, 0, err
		}
		if len(out)+1+len(raw)+1 > room {
			break
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		n++
	}
	return append(out, ']'), n, nil
}

// withMessages writes the reply {"messages":<list>, ...envelope's fields}.
func withMessages(list []byte, envelope any) ([]byte, error) {
	env, err := marshal(envelope)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(list)+len(env)+16)
	out = append(out, `{"messages":`...)
	out = append(out, list...)
	if len(env) > 2 {
		out = append(out, ',')
	}
	return append(out, env[1:]...), nil
}

// getEnvelope is GetReply but for its messages.
type getEnvelope struct {
	Status      string `json:"status"`
	NextOffset  int64  `json:"nextOffset"`
	MinOffset   int64  `json:"minOffset"`
	MaxOffset   int64  `json:"maxOffset"`
	Truncated   bool   `json:"truncated,omitempty"`
	WaitSkipped bool   `json:"waitSkipped,omitempty"`
}

// handleGet answers a get inline, or from a long-poll goroutine when it asks to wait and a slot
// is free.
func (s *apiService) handleGet(req micro.Request) {
	if !s.enter() {
		s.respond(req, nil, errShuttingDown)
		return
	}
	var r api.GetRequest
	if err := decodeRequest(req.Data(), &r); err != nil {
		s.respond(req, nil, err)
		s.leave()
		return
	}
	if r.WaitMs < 0 || r.Max < 0 || r.MaxBytes < 0 || r.Offset < 0 {
		s.respond(req, nil, badRequest{fmt.Errorf("negative waitMs, max, maxBytes or offset: %+v", r)})
		s.leave()
		return
	}
	if r.WaitMs > 0 {
		select {
		case s.polls <- struct{}{}:
			go func() { // bounded by polls; stop waits for it through inflight
				defer s.leave()
				defer func() { <-s.polls }()
				if f := hook(&s.polling); f != nil {
					f()
				}
				out, err := s.get(r, false)
				s.reply(req.Reply(), out, err)
			}()
			return
		default:
		}
	}
	out, err := s.get(r, r.WaitMs > 0)
	s.respond(req, out, err)
	s.leave()
}

// get reads (waiting up to r.WaitMs unless skipWait) and encodes the reply within the limit.
func (s *apiService) get(r api.GetRequest, skipWait bool) ([]byte, error) {
	limit := s.replyLimit()
	asked := cmpOrInt(r.MaxBytes, reader.DefaultGetMaxBytes)
	fit := max((limit-envelopeRoom)/4*3, 1) // base64 makes every byte 4/3; the rest is checked below
	gr := GetRequest{Topic: r.Topic, QueueID: r.QueueID, Offset: r.Offset, Max: r.Max,
		MaxBytes: min(asked, fit), Tags: r.Tags}
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
		WaitSkipped: skipWait,
	}
	switch {
	case n < len(res.Messages):
		env.NextOffset, env.Truncated = res.Messages[n].QueueOffset, true
	case gr.MaxBytes < asked && n > 0 && n < cmpOrInt(min(r.Max, reader.MaxGetMax), reader.DefaultGetMax) &&
		res.NextOffset < res.MaxOffset:
		env.Truncated = true // the lowered maxBytes may have cut the batch short
	}
	return withMessages(list, env)
}

// msg answers a lookup by message id, with the body range that fits.
func (s *apiService) msg(data []byte) ([]byte, error) {
	var r api.MsgRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, err
	}
	if r.MsgID == "" {
		return nil, badRequest{errors.New("no msgId")}
	}
	m, err := s.e.Lookup(r.MsgID)
	if err != nil {
		return nil, err
	}
	if r.BodyOffset < 0 || r.BodyOffset > len(m.Body) || r.BodyMax < 0 {
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

func (s *apiService) query(data []byte) ([]byte, error) {
	var r api.QueryRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, err
	}
	msgs, err := s.e.Query(s.ctx, QueryRequest{Topic: r.Topic, Key: r.Key, Begin: r.Begin, End: r.End, Max: r.Max})
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

func (s *apiService) offsetForTime(data []byte) ([]byte, error) {
	var r api.OffsetForTimeRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, err
	}
	off, err := s.e.OffsetForTime(r.Topic, r.QueueID, r.Timestamp)
	if err != nil {
		return nil, err
	}
	return marshal(api.OffsetForTimeReply{Offset: off})
}

func (s *apiService) offsets(data []byte) ([]byte, error) {
	var r api.OffsetsRequest
	if err := decodeRequest(data, &r); err != nil {
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

func (s *apiService) topics(data []byte) ([]byte, error) {
	var r api.TopicsRequest
	if err := decodeRequest(data, &r); err != nil {
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

func (s *apiService) commit(data []byte) ([]byte, error) {
	var r api.CommitRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, err
	}
	if err := reader.ValidateGroup(r.Group); err != nil {
		return nil, err
	}
	if err := s.checkQueue(r.Topic, r.QueueID); err != nil {
		return nil, err
	}
	if err := s.e.CommitOffset(r.Group, r.Topic, r.QueueID, r.Offset); err != nil {
		return nil, err
	}
	return marshal(api.CommitReply{Offset: r.Offset})
}

// checkQueue is ErrUnknownQueue unless the store has the queue.
func (s *apiService) checkQueue(topic string, id int32) error {
	qs, err := s.e.QueueOffsets(topic)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.QueueID == id {
			return nil
		}
	}
	return fmt.Errorf("%w: %s/%d", ErrUnknownQueue, topic, id)
}

func (s *apiService) fetch(data []byte) ([]byte, error) {
	var r api.FetchRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, err
	}
	if err := reader.ValidateGroup(r.Group); err != nil {
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
func (s *apiService) handleReplay(req micro.Request) {
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
	go pprof.Do(s.ctx, pprof.Labels("stage", "api", "replay", r.req.ID), func(ctx context.Context) {
		defer s.leave()
		defer func() { <-s.replays }()
		res, err := r.run(ctx)
		ev := s.log.Info()
		if err != nil {
			ev = s.log.Warn().Err(err)
		}
		ev.Str("replay", res.ID).Str("topic", r.req.Topic).Str("subject", r.req.Subject).
			Int64("sent", res.Sent).Int64("redelivered", res.Redelivered).Msg("replay ended")
	})
}

// planReplay decodes a replay request and prepares it (capturing the stop offsets).
func (s *apiService) planReplay(data []byte) (*replay, []byte, error) {
	var r api.ReplayRequest
	if err := decodeRequest(data, &r); err != nil {
		return nil, nil, err
	}
	if r.Subject == s.prefix || strings.HasPrefix(r.Subject, s.prefix+".") {
		return nil, nil, badRequest{fmt.Errorf("subject %q is under the read API's prefix", r.Subject)}
	}
	req := ReplayRequest{
		Conn: s.nc, Subject: r.Subject, Topic: r.Topic, Queues: r.Queues, StartOffset: r.StartOffset,
		StartTime: r.StartTime, Tags: r.Tags, MaxInFlight: r.MaxInFlight,
		AckWait: time.Duration(r.AckWaitMs) * time.Millisecond, MaxDeliver: r.MaxDeliver, Rate: r.Rate,
		KeysHeader: s.keys, TagsHeader: s.tags, onWindowFull: hook(&s.replayFull),
	}
	switch r.Mode {
	case "", api.ReplayAcked:
		req.Mode = ReplayAcked
	case api.ReplayPaced:
		req.Mode = ReplayPaced
	default:
		return nil, nil, badRequest{fmt.Errorf("mode %q: want %q or %q", r.Mode, api.ReplayAcked, api.ReplayPaced)}
	}
	rp, err := s.e.prepareReplay(req)
	if err != nil {
		return nil, nil, err
	}
	out := api.ReplayReply{ReplayID: rp.req.ID, Subject: rp.req.Subject, Mode: rp.req.Mode.String(),
		MaxCount: rp.plannedCount(), Queues: make([]api.ReplayQueue, 0, len(rp.queues))}
	for _, q := range rp.queues {
		out.Queues = append(out.Queues, api.ReplayQueue{QueueID: q.QueueID, StartOffset: q.Start, StopOffset: q.Stop})
	}
	plan, err := marshal(out)
	return rp, plan, err
}

// apiExcluded is ingress's Exclude for the read API's subjects when its prefix does not start
// with '$' (ingress never stores $-subjects anyway).
func apiExcluded(nopts NATSOptions) func(string) bool {
	prefix := strings.TrimSuffix(cmpOr(nopts.APIPrefix, api.DefaultPrefix), ".")
	if nopts.NoReadAPI || strings.HasPrefix(prefix, "$") {
		return nil
	}
	return func(subject string) bool {
		return subject == prefix || strings.HasPrefix(subject, prefix+".")
	}
}
