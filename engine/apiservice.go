package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
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

	// Partitioned ingest (apipartitions.go): the partitions, the handlers served per partition,
	// and the subscriptions of the partitions served now (guarded by partMu).
	parts        *ingress.Partitions
	partHandlers map[string]micro.HandlerFunc
	partMu       sync.Mutex
	partSubs     map[int][]*nats.Subscription

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
func startAPI(e *Engine, nc *nats.Conn, nopts NATSOptions, parts *ingress.Partitions, log zerolog.Logger) (*apiService, error) {
	s := &apiService{
		e: e, nc: nc, prefix: strings.TrimSuffix(cmpOr(nopts.APIPrefix, api.DefaultPrefix), "."),
		log:  log.With().Str("stage", "api").Logger(),
		keys: cmpOr(nopts.KeysHeader, ingress.DefaultKeysHeader), tags: cmpOr(nopts.TagsHeader, ingress.DefaultTagsHeader),
		polls:   make(chan struct{}, cmpOrInt(nopts.MaxLongPolls, DefaultMaxLongPolls)),
		replays: make(chan struct{}, cmpOrInt(nopts.MaxReplays, DefaultMaxReplays)),
	}
	if !replay.ValidSubject(s.prefix) {
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
	if parts != nil {
		meta["partitions"] = formatPartitions(parts.OwnedNow()) // at the start: handoffs move them
		meta["partition_count"] = strconv.Itoa(parts.Count)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:    api.ServiceName,
		Version: version,
		Description: "RocketStore engine: NATS messages in a RocketMQ store; read API " +
			"(get, pull, msg, query, offset_for_time, offsets, topics, commit, fetch, replay)",
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
		{api.EndpointPull, "messages of a queue as NATS messages to the reply subject, then an end message", s.handlePull},
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
	if parts != nil {
		if err := s.addPartitionEndpoints(svc, parts); err != nil {
			s.stop()
			return nil, err
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
	s.partMu.Lock()
	parts := slices.Collect(maps.Keys(s.partSubs))
	s.partMu.Unlock()
	for _, p := range parts {
		s.unservePartition(p)
	}
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

// respond sends out, or the error reply for err; opts add to either (headers).
func (s *apiService) respond(req micro.Request, out []byte, err error, opts ...micro.RespondOpt) {
	if err != nil {
		code := apiCode(err)
		s.logRefused(req.Subject(), code, err)
		body, _ := json.Marshal(api.ErrorReply{Error: &api.Error{Code: code, Description: err.Error()}})
		if rerr := req.Error(strconv.Itoa(code), err.Error(), body, opts...); rerr != nil {
			s.log.Debug().Err(rerr).Str("subject", req.Subject()).Msg("read API: could not reply")
		}
		return
	}
	if rerr := req.Respond(out, opts...); rerr != nil {
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
		s.logRefused(subject, code, err)
		msg.Data, _ = json.Marshal(api.ErrorReply{Error: &api.Error{Code: code, Description: err.Error()}})
		msg.Header = nats.Header{}
		msg.Header.Set(micro.ErrorHeader, err.Error())
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
	}
	if perr := s.nc.PublishMsg(msg); perr != nil {
		s.log.Warn().Err(perr).Str("subject", subject).Int("bytes", len(msg.Data)).Msg("read API: could not reply")
	}
}

// logRefused logs a request answered with an error: one debug line per request (only a level
// check when the logger is above debug; see LevelWriter), a warning for an internal error (500), which is a bug or a
// damaged store rather than a client's mistake. The counters are micro's (NumErrors per
// endpoint, `nats micro stats rocketstore`).
func (s *apiService) logRefused(subject string, code int, err error) {
	ev := s.log.Debug()
	if code == api.CodeInternal {
		ev = s.log.Warn()
	}
	if ev == nil {
		return
	}
	msg := err.Error()
	if len(msg) > 1024 {
		msg = msg[:1024] + "..."
	}
	ev.Str("subject", subject).Int("code", code).Str("error", msg).Msg("read API: request refused")
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
