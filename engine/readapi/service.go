// Package readapi serves the read API ($RS.API.*: get, pull, msg, query, offsets,
// offset_for_time, topics, commit, fetch and replay, with the per-partition and fan-out
// endpoints of partitioned ingest) as the micro service "rocketstore" on the engine's
// connection. The wire types and the Go client are package engine/api. It declares what it
// needs of the store (Engine) and owns nothing of it.
package readapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/offsets"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress"
)

// Defaults of the read API's bounds (Config).
const (
	// DefaultMaxLongPolls bounds the gets waiting at the head of a queue at once. Each holds a
	// goroutine and, once woken, one reply (at most the connection's max payload).
	DefaultMaxLongPolls = 128
	// DefaultMaxReplays bounds the replays running at once.
	DefaultMaxReplays = 4
	// DefaultVersion is the version the micro service shows when Config.Version is empty.
	DefaultVersion = "0.0.0-dev"
)

// envelopeRoom is what a reply keeps for everything but its messages (status, offsets, flags,
// brackets): its fields take under 200 bytes.
const envelopeRoom = 512

var errShuttingDown = errors.New("engine: read API shutting down")

// Service serves the read API (package engine/api) on the engine's connection as the micro
// service "rocketstore": one endpoint per operation under the prefix.
//
// Concurrency. micro runs each endpoint's handler on that endpoint's subscription goroutine, so
// a slow request delays only requests to the same endpoint. A get that asks to wait would hold
// every later get behind it, so long polls run on goroutines of their own, at most MaxLongPolls
// (a semaphore; when it is full the get is answered at once, with WaitSkipped). Replays run on
// goroutines too, at most MaxReplays (when full: 429). Everything else answers inline.
//
// Shutdown (Stop, called by the engine's Server before the engine closes): the service stops (its
// subscriptions drain), then the gate closes: a handler that starts afterwards answers 503 and
// touches nothing; then ctx is cancelled, which ends long polls (503) and replays (their end
// message says why), and Stop waits for every handler, long poll and replay under way. Only then
// may the engine close, so no handler ever reads a closed store.
//
// Bounds. No reply exceeds the connection's max payload: a get's maxBytes is lowered to what can
// fit once base64 (4/3) is counted, every message is encoded and measured, and the reply stops
// before the message that would not fit (Truncated; NextOffset is that message's offset). A
// message too large for any reply is sent without its body (Partial), which msg serves in ranges.
type Service struct {
	e      Engine
	cfg    Config
	nc     *nats.Conn
	svc    micro.Service
	prefix string
	log    zerolog.Logger
	keys   string // the ingress keys and tags headers, for replays
	tags   string

	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc

	polls   chan struct{} // a slot per long poll running
	replays chan struct{} // a slot per replay running

	mu       sync.Mutex
	stopping bool           // guarded by mu
	inflight sync.WaitGroup // handlers, long polls and replays under way; Add under mu

	// Consumer groups (group.go): the coordinator, nil without Config.GroupStore; the engine's
	// id and its own prefix, <prefix>.e.<id>.
	groups              *groups.Coordinator
	engineID, engineAPI string

	// Partitioned ingest (partitions.go): the handlers served per partition, and the
	// subscriptions of the partitions served now (guarded by partMu).
	partHandlers map[string]micro.HandlerFunc
	partMu       sync.Mutex
	partSubs     map[int][]*nats.Subscription

	// Test seams (atomic: tests set them while the service runs): polling is called by a long
	// poll's goroutine just before it calls Engine.Get; replayFull is passed to replays as
	// OnWindowFull.
	polling    atomic.Pointer[func()]
	replayFull atomic.Pointer[func()]
}

// OnPoll makes every long poll call f on its goroutine just before it reads (tests wait on it
// to know a get or pull waits at the head).
func (s *Service) OnPoll(f func()) { s.polling.Store(&f) }

// OnReplayWindowFull makes every acked replay started afterwards call f when its window is full
// (replay.Request.OnWindowFull).
func (s *Service) OnReplayWindowFull(f func()) { s.replayFull.Store(&f) }

// Stats are micro's counters of the service's endpoints.
func (s *Service) Stats() micro.Stats { return s.svc.Stats() }

// hook is the function a test hook holds, nil when unset.
func hook(p *atomic.Pointer[func()]) func() {
	if f := p.Load(); f != nil {
		return *f
	}
	return nil
}

// Engine is what the read API reads and writes of the store (engine.Engine implements it).
type Engine interface {
	replay.Store // Get, Lookup, QueueOffsets, OffsetForTime
	Query(ctx context.Context, req reader.QueryRequest) ([]reader.Message, error)
	Topics() []reader.TopicInfo
	CommitOffset(group, topic string, queueID int32, offset int64) error
	FetchOffset(group, topic string, queueID int32) (int64, bool)
	// GroupOffsets is the committed offsets table the consumer groups use.
	GroupOffsets() *offsets.Table
	// Records is the batched read.
	Records(ctx context.Context, req reader.RecordsRequest, buf []byte) ([]reader.QueueRecords, []byte, error)
}

// Config configures the service. Zero values are the defaults.
type Config struct {
	// Prefix of the subjects (api.DefaultPrefix). KeysHeader and TagsHeader are the headers KEYS
	// and TAGS go back to in pulls and replays (ingress's defaults).
	Prefix, KeysHeader, TagsHeader string
	// MaxLongPolls bounds the gets and pulls waiting at a queue's head at once
	// (DefaultMaxLongPolls), MaxReplays the replays running at once (DefaultMaxReplays).
	MaxLongPolls, MaxReplays int
	// Version is the engine's version the service shows (semver; anything else is shown as
	// 0.0.0-<it>, DefaultVersion when empty). Metadata is added to the service's (store_dir,
	// flush_mode...).
	Version  string
	Metadata map[string]string
	// PartitionCount, under partitioned ingest, is the number of partitions, and Owned says which
	// this engine owns now (they move with handoffs): the API then serves per-partition and
	// fan-out endpoints (partitions.go). 0 without partitions.
	PartitionCount int
	Owned          func() []int
	// Unavailable are errors of the store answered 503 (the engine closing), besides the
	// service's own shutdown.
	Unavailable []error
	Logger      zerolog.Logger
	// GroupStore is what consumer groups need of the store, Groups their coordinator's
	// settings (docs/GROUPS.md); without a GroupStore the service has no group endpoints.
	GroupStore GroupStore
	Groups     groups.Config
}

// Start registers the micro service and its endpoints on nc.
func Start(e Engine, nc *nats.Conn, cfg Config) (*Service, error) {
	s := &Service{
		e: e, cfg: cfg, nc: nc, prefix: strings.TrimSuffix(cmp.Or(cfg.Prefix, api.DefaultPrefix), "."),
		log:  cfg.Logger.With().Str("stage", "api").Logger(),
		keys: cmp.Or(cfg.KeysHeader, ingress.DefaultKeysHeader), tags: cmp.Or(cfg.TagsHeader, ingress.DefaultTagsHeader),
		polls:   make(chan struct{}, orDefault(cfg.MaxLongPolls, DefaultMaxLongPolls)),
		replays: make(chan struct{}, orDefault(cfg.MaxReplays, DefaultMaxReplays)),
	}
	if !replay.ValidSubject(s.prefix) {
		return nil, fmt.Errorf("read API: prefix %q is not a subject without wildcards", s.prefix)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.ctx, s.cancel = ctx, func() { cancel(errShuttingDown) }
	version, meta := serviceVersion(cfg.Version)
	maps.Copy(meta, cfg.Metadata)
	meta["api_prefix"] = s.prefix
	if cfg.PartitionCount > 0 {
		meta["partitions"] = formatPartitions(cfg.Owned()) // at the start: handoffs move them
		meta["partition_count"] = strconv.Itoa(cfg.PartitionCount)
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
		{api.EndpointRead, "records of several queues in one message (batched read)", s.handleRead},
	}
	for _, ep := range endpoints {
		if err := g.AddEndpoint(ep.name, ep.h, micro.WithEndpointMetadata(map[string]string{"description": ep.doc})); err != nil {
			s.Stop()
			return nil, fmt.Errorf("read API: endpoint %s: %w", ep.name, err)
		}
	}
	if cfg.PartitionCount > 0 {
		if err := s.addPartitionEndpoints(svc); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if cfg.GroupStore != nil {
		if err := s.startGroups(svc); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

func orDefault(v, def int) int {
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

// Stop stops the service and waits for every request under way (see Service). Idempotent.
func (s *Service) Stop() {
	s.partMu.Lock()
	parts := slices.Collect(maps.Keys(s.partSubs))
	s.partMu.Unlock()
	for _, p := range parts {
		s.UnservePartition(p)
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
	if s.groups != nil {
		s.groups.Close()
	}
}

// enter admits a request while the service runs; leave must follow.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *Service) leave() { s.inflight.Done() }

// inline makes a handler of an operation answered on the endpoint's goroutine.
func (s *Service) inline(op func(data []byte) ([]byte, error)) micro.HandlerFunc {
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
func (s *Service) respond(req micro.Request, out []byte, err error, opts ...micro.RespondOpt) {
	if err != nil {
		code := s.code(err)
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
func (s *Service) reply(subject string, out []byte, err error) {
	msg := &nats.Msg{Subject: subject, Data: out}
	if err != nil {
		code := s.code(err)
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
func (s *Service) logRefused(subject string, code int, err error) {
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

// replyCode maps an error to its reply code (see the engine/api package doc); unavailable are
// the store's errors answered 503 (Config.Unavailable).
func replyCode(err error, unavailable ...error) int {
	var br badRequest
	switch {
	case errors.As(err, &br), errors.Is(err, reader.ErrBadMsgID), errors.Is(err, offsets.ErrInvalidGroup),
		errors.Is(err, reader.ErrInvalidRequest), errors.Is(err, commitlog.ErrInvalidTopic):
		return api.CodeBadRequest
	case errors.Is(err, reader.ErrUnknownQueue), errors.Is(err, reader.ErrNotFound),
		errors.Is(err, groups.ErrUnknownMember), errors.Is(err, groups.ErrUnknownTopic), errors.Is(err, errNoGroup):
		return api.CodeNotFound
	case errors.Is(err, groups.ErrFenced), errors.Is(err, groups.ErrConflict):
		return api.CodeConflict
	case errors.Is(err, groups.ErrTooManyMembers), errors.Is(err, offsets.ErrTooManyGroups):
		return api.CodeTooMany
	case errors.Is(err, groups.ErrInvalid), errors.Is(err, offsets.ErrInvalidGroup), errors.Is(err, offsets.ErrInvalidCommit):
		return api.CodeBadRequest
	case errors.Is(err, syscall.ENOSPC):
		return api.CodeDiskFull
	case errors.Is(err, errTooManyReplays):
		return api.CodeTooManyReplays
	case errors.Is(err, reader.ErrIndexDisabled):
		return api.CodeNotImplemented
	case isAny(err, unavailable), errors.Is(err, reader.ErrClosed), errors.Is(err, stages.ErrClosed),
		errors.Is(err, errShuttingDown), errors.Is(err, context.Canceled), errors.Is(err, groups.ErrClosed),
		errors.Is(err, offsets.ErrClosed):
		return api.CodeUnavailable
	}
	return api.CodeInternal
}

// code is replyCode with the store's errors that mean it is closing.
func (s *Service) code(err error) int { return replyCode(err, s.cfg.Unavailable...) }

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// replyLimit is the most a reply may hold: the connection's max payload (the server's, learnt
// at connect; it can change with a reconnect, so it is read per request).
func (s *Service) replyLimit() int { return int(s.nc.MaxPayload()) }

// Excluded is ingress's Exclude for the read API's subjects under prefix (api.DefaultPrefix
// when empty), nil when the prefix starts with '$' (ingress never stores $-subjects anyway).
func Excluded(prefix string) func(string) bool {
	prefix = strings.TrimSuffix(cmp.Or(prefix, api.DefaultPrefix), ".")
	if strings.HasPrefix(prefix, "$") {
		return nil
	}
	return func(subject string) bool {
		return subject == prefix || strings.HasPrefix(subject, prefix+".")
	}
}
