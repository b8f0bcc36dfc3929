package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// The read commands (get, query, msg, offsets, topics; replay in replay.go) read a store
// offline, from its directory (--store: read-only, without the lock, so also while an engine
// writes it), or online, from a running engine's read API over NATS (--nats). They print tables
// by default and, with --json, one JSON object per line.
//
// Exit codes: 0 success, 1 runtime error (unknown topic, offset out of range, no engine
// answering...), 2 usage error (kong's parse and Validate errors, a --store that is no store,
// and size flags that contradict the store's files).

// readUsageExit is the exit code of a usage error (main maps kong's own to it too).
const readUsageExit = 2

// readUsageError is a usage error found when the command runs (a --store that holds no store).
type readUsageError struct{ err error }

func (e readUsageError) Error() string { return e.err.Error() }
func (e readUsageError) Unwrap() error { return e.err }

// readCommand is a read command: it writes its output to stdout and, when stderr is a
// terminal, progress to stderr.
type readCommand interface {
	execute(ctx context.Context, stdout, stderr io.Writer) error
	name() string
}

// runRead runs cmd and returns its exit code, telling an error on stderr.
func runRead(ctx context.Context, cmd readCommand, stdout, stderr io.Writer) int {
	err := cmd.execute(ctx, stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "engine %s: %v\n", cmd.name(), err)
	if _, ok := errors.AsType[readUsageError](err); ok {
		return readUsageExit
	}
	return 1
}

// readMain is the Run of every read command: it stops on SIGINT/SIGTERM and exits with the
// command's code (kong's Run can only fail with 1).
func readMain(cmd readCommand) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := runRead(ctx, cmd, os.Stdout, os.Stderr)
	stop()
	if code != 0 {
		os.Exit(code)
	}
	return nil
}

// readSourceFlags choose where a read command reads: a store directory or a running engine.
type readSourceFlags struct {
	Store string `help:"Read this store directory offline: read-only, without its lock (an engine may be writing it)." type:"path" placeholder:"DIR" group:"source"`

	Online readNATSFlags `embed:""`

	// The sizes are read from the store's files; a flag given must agree with them.
	CommitLogSize byteSize `help:"Size of each CommitLog segment (offline). Not needed: read from the store's files; if given, it must be theirs." group:"store sizes"`
	CQUnits       int      `name:"cq-units" help:"ConsumeQueue units (20 bytes each) per file (offline). Not needed: read from the files; if given, it must be theirs." group:"store sizes"`
	IndexSlots    int      `help:"IndexFile hash slots per file (offline). Not needed: read from the files; if given, it must be theirs." group:"store sizes"`
	IndexEntries  int      `help:"IndexFile entries per file (offline). Not needed: read from the files; if given, it must be theirs." group:"store sizes"`
}

// readNATSFlags reach a running engine's read API (natscli's names and environment variables).
type readNATSFlags struct {
	NATS      string        `name:"nats" aliases:"server" short:"s" help:"NATS server of a running engine serving the read API (online); $NATS_URL when neither --store nor --nats is given." placeholder:"URL" group:"source"`
	Creds     string        `help:"NATS user credentials file (online)." env:"NATS_CREDS" type:"path" placeholder:"FILE" group:"source"`
	Timeout   time.Duration `help:"Timeout of each request to the engine (online)." default:"5s" env:"NATS_TIMEOUT" group:"source"`
	APIPrefix string        `name:"api-prefix" help:"Subject prefix of the engine's read API (online)." default:"$RS.API" group:"source"`
	// Partitions: the engines partition their topics (docs/SCALE-OUT.md).
	Partitions int `help:"The engines partition topics into this many partitions (their --partitions, online): a queue is read from its owner, and offsets, topics and key queries gather every engine's answer, naming the partitions that did not answer." default:"0" group:"source"`
}

// resolve fills NATS from $NATS_URL when it is not given, and checks the flags.
func (f *readNATSFlags) resolve() error {
	if f.NATS == "" {
		f.NATS = os.Getenv("NATS_URL")
	}
	if f.Timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// dial connects to NATS for the read API.
func (f *readNATSFlags) dial(what string) (*onlineSource, error) {
	src, err := dialEngine(f.NATS, f.Creds, f.APIPrefix, f.Timeout, what)
	if err == nil && f.Partitions > 0 {
		src.partitions = f.Partitions
		src.c = api.NewClient(src.nc, api.WithPrefix(f.APIPrefix), api.WithTimeout(f.Timeout), api.WithPartitions(f.Partitions))
	}
	return src, err
}

// Validate picks the source: exactly one of --store and --nats ($NATS_URL standing in for
// --nats when neither is given, so that a NATS_URL in the environment never conflicts with
// --store).
func (f *readSourceFlags) Validate() error {
	switch {
	case f.Store != "" && f.Online.NATS != "":
		return errors.New("--store and --nats can't be used together: --store reads a store directory, --nats asks a running engine")
	case f.Store != "":
		if f.CQUnits < 0 || f.IndexSlots < 0 || f.IndexEntries < 0 {
			return errors.New("--cq-units, --index-slots and --index-entries must be positive (or left out: the store's files tell them)")
		}
		return nil
	}
	if err := f.Online.resolve(); err != nil {
		return err
	}
	if f.Online.NATS == "" {
		return errors.New("no source: give --store DIR (read a store directory) or --nats URL (ask a running engine; $NATS_URL works too)")
	}
	return nil
}

// open opens the source: the store read-only, or a connection to NATS.
func (f *readSourceFlags) open(what string) (readSource, error) {
	if f.Store != "" {
		src, err := openOfflineSource(f.Store, reader.OfflineOptions{
			CommitLogFileSize: int64(f.CommitLogSize), ConsumeQueueUnits: f.CQUnits,
			IndexSlots: f.IndexSlots, IndexEntries: f.IndexEntries,
		})
		if err != nil {
			return nil, err
		}
		return src, nil
	}
	src, err := f.Online.dial(what)
	if err != nil {
		return nil, err
	}
	return src, nil
}

// dialEngine connects to NATS for the read API.
func dialEngine(url, creds, prefix string, timeout time.Duration, what string) (*onlineSource, error) {
	opts := []nats.Option{nats.Name("rocketstore engine " + what), nats.Timeout(timeout), nats.MaxReconnects(0)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", url, err)
	}
	return &onlineSource{
		nc: nc, url: nc.ConnectedUrlRedacted(), prefix: prefix,
		c: api.NewClient(nc, api.WithPrefix(prefix), api.WithTimeout(timeout)),
	}, nil
}

// readSource is what the read commands read from: an offline Reader or the read API. Messages
// come as the API's wire type, with their whole bodies.
type readSource interface {
	// get reads once from req.Offset (a long poll when req.WaitMs > 0).
	get(ctx context.Context, req api.GetRequest) (*api.GetReply, error)
	msg(ctx context.Context, msgID string) (api.Message, error)
	query(ctx context.Context, req api.QueryRequest) (*api.QueryReply, error)
	offsets(ctx context.Context, topic string) ([]api.QueueOffsets, error)
	offsetForTime(ctx context.Context, topic string, queueID int32, ms int64) (int64, error)
	topics(ctx context.Context) ([]api.TopicInfo, error)
	// explain turns an error of the source into one a user can act on.
	explain(err error) error
	// where names the source in messages: "the store /x" or "the engine at nats://...".
	where() string
	close() error
}

// isUnknownQueue: the store has no such topic or queue (offline) or the API said 404.
func isUnknownQueue(err error) bool {
	return errors.Is(err, reader.ErrUnknownQueue) || api.CodeOf(err) == api.CodeNotFound
}

// unknownTopic explains a topic the source has no queue of, naming the topic a subject maps
// to when a subject was given and that topic exists.
func unknownTopic(ctx context.Context, src readSource, topic string) error {
	msg := fmt.Sprintf("topic %q has no queues in this store (%s)", topic, src.where())
	if o, ok := src.(*onlineSource); ok && o.partitions > 0 {
		msg = fmt.Sprintf("no engine has topic %q: every one of the %d partitions answered, none holds a message of it (%s)",
			topic, o.partitions, src.where())
	}
	if hint := subjectTopicHint(ctx, src, topic); hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}

// unknownQueue explains an unknown topic or queue: whether the topic has no queues at all, or
// which queues it has.
func unknownQueue(ctx context.Context, src readSource, topic string, queueID int32) error {
	qs, err := src.offsets(ctx, topic)
	switch {
	case isUnknownQueue(err):
		return unknownTopic(ctx, src, topic)
	case err != nil:
		return src.explain(err)
	}
	ids := make([]int32, len(qs))
	for i, q := range qs {
		ids[i] = q.QueueID
	}
	return fmt.Errorf("topic %q has no queue %d in this store (%s); its queues: %s",
		topic, queueID, src.where(), queueList(ids))
}

// subjectTopicHint names the topic a subject is stored under when topic looks like a subject
// whose topic exists ("orders.eu" is stored as "orders_eu").
func subjectTopicHint(ctx context.Context, src readSource, topic string) string {
	mapped, err := route.SubjectToTopic(topic)
	if err != nil || mapped == topic {
		return ""
	}
	if _, err := src.offsets(ctx, mapped); err != nil {
		return ""
	}
	return fmt.Sprintf("did you mean %q (the topic subject %s is stored under)?", mapped, topic)
}

// offlineSource reads a store directory with an offline Reader.
type offlineSource struct {
	r   *reader.Reader
	dir string
}

// refreshEvery is how often an offline get that waits at the head of its queue looks for
// new messages (an offline Reader has no dispatch to wake it).
const refreshEvery = 100 * time.Millisecond

// offlineWaiting, when set (tests), is called when an offline get starts waiting at the head.
var offlineWaiting func()

func openOfflineSource(dir string, opts reader.OfflineOptions) (*offlineSource, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, readUsageError{fmt.Errorf("no store at %s (no such directory)", dir)}
	}
	if st, err := os.Stat(filepath.Join(dir, "commitlog")); err != nil || !st.IsDir() {
		return nil, readUsageError{fmt.Errorf("no store at %s (it has no commitlog directory)", dir)}
	}
	r, err := reader.OpenOffline(nil, dir, opts)
	switch {
	case errors.Is(err, reader.ErrSizeMismatch):
		return nil, readUsageError{fmt.Errorf("%w: leave out --commit-log-size, --cq-units, --index-slots and "+
			"--index-entries, which the store's files tell", err)}
	case errors.Is(err, reader.ErrSizeUnknown):
		return nil, readUsageError{fmt.Errorf("%w: give --index-slots and --index-entries as the store was written", err)}
	case err != nil:
		return nil, fmt.Errorf("open the store %s read-only: %w (engine verify --store %s checks the whole store)", dir, err, dir)
	}
	return &offlineSource{r: r, dir: dir}, nil
}

func (s *offlineSource) where() string { return "store " + s.dir }
func (s *offlineSource) close() error  { return s.r.Close() }

func (s *offlineSource) explain(err error) error {
	switch {
	case errors.Is(err, reader.ErrIndexDisabled):
		return fmt.Errorf("the store %s has no message index (written with --no-index): query needs it", s.dir)
	case errors.Is(err, reader.ErrCorrupt):
		return fmt.Errorf("%w (engine verify --store %s checks the whole store)", err, s.dir)
	}
	return err
}

// get reads once; with WaitMs it looks again every refreshEvery, refreshing the Reader, until
// a message arrives or the wait ends.
func (s *offlineSource) get(ctx context.Context, req api.GetRequest) (*api.GetReply, error) {
	rreq := reader.GetRequest{Topic: req.Topic, QueueID: req.QueueID, Offset: req.Offset, Max: req.Max,
		MaxBytes: req.MaxBytes, Tags: req.Tags, Subject: req.Subject}
	res, err := s.r.Get(ctx, rreq)
	if err == nil && req.WaitMs > 0 && atQueueHead(res, rreq.Offset) {
		deadline := time.NewTimer(time.Duration(req.WaitMs) * time.Millisecond)
		defer deadline.Stop()
		tick := time.NewTicker(refreshEvery)
		defer tick.Stop()
		if offlineWaiting != nil {
			offlineWaiting()
		}
	wait:
		for err == nil && atQueueHead(res, rreq.Offset) {
			rreq.Offset = res.NextOffset // past units filtered out up to the head
			select {
			case <-tick.C:
			case <-deadline.C:
				break wait
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if err = s.r.Refresh(); err == nil {
				res, err = s.r.Get(ctx, rreq)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	out := &api.GetReply{Status: res.Status.String(), NextOffset: res.NextOffset, MinOffset: res.MinOffset,
		MaxOffset: res.MaxOffset, Messages: make([]api.Message, len(res.Messages))}
	for i := range res.Messages {
		out.Messages[i] = wireOf(&res.Messages[i])
	}
	return out, nil
}

// atQueueHead says a Get found nothing because nothing is there yet (reader's long-poll rule).
func atQueueHead(res reader.GetResult, offset int64) bool {
	switch res.Status {
	case reader.OffsetOverflowOne:
		return true
	case reader.NoMessageInQueue:
		return offset == 0
	case reader.NoMatchedMessage:
		return res.NextOffset == res.MaxOffset
	}
	return false
}

func (s *offlineSource) msg(_ context.Context, msgID string) (api.Message, error) {
	m, err := s.r.Lookup(msgID)
	if err != nil {
		return api.Message{}, err
	}
	return wireOf(&m), nil
}

func (s *offlineSource) query(ctx context.Context, req api.QueryRequest) (*api.QueryReply, error) {
	msgs, err := s.r.Query(ctx, reader.QueryRequest{Topic: req.Topic, Key: req.Key, Begin: req.Begin, End: req.End, Max: req.Max})
	if err != nil {
		return nil, err
	}
	out := &api.QueryReply{Messages: make([]api.Message, len(msgs))}
	for i := range msgs {
		out.Messages[i] = wireOf(&msgs[i])
	}
	return out, nil
}

func (s *offlineSource) offsets(_ context.Context, topic string) ([]api.QueueOffsets, error) {
	qs, err := s.r.Offsets(topic)
	if err != nil {
		return nil, err
	}
	out := make([]api.QueueOffsets, len(qs))
	for i, q := range qs {
		out[i] = api.QueueOffsets{QueueID: q.QueueID, MinOffset: q.Min, MaxOffset: q.Max,
			MinStoreTime: q.MinStoreTime, MaxStoreTime: q.MaxStoreTime}
	}
	return out, nil
}

func (s *offlineSource) offsetForTime(_ context.Context, topic string, queueID int32, ms int64) (int64, error) {
	return s.r.OffsetForTime(topic, queueID, ms)
}

func (s *offlineSource) topics(context.Context) ([]api.TopicInfo, error) {
	ts := s.r.Topics()
	out := make([]api.TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = api.TopicInfo{Name: t.Name, Queues: t.Queues}
	}
	return out, nil
}

// wireOf is m as the read API sends it, with its whole body (the engine's wireMessage).
func wireOf(m *reader.Message) api.Message {
	w := api.Message{
		Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, CommitLogOffset: m.PhysicalOffset,
		Size: m.Size, MsgID: m.MsgID, StoreTimestamp: m.StoreTimestamp, BornTimestamp: m.BornTimestamp,
		Tags: m.Tags, Keys: m.Keys, UniqKey: m.UniqKey, Properties: m.Properties,
		Body: m.Body, BodySize: len(m.Body),
	}
	if m.BornHost.IsValid() {
		w.BornHost = m.BornHost.String()
	}
	if m.StoreHost.IsValid() {
		w.StoreHost = m.StoreHost.String()
	}
	if w.Properties == nil {
		w.Properties = commitlog.Properties(m.RawProperties).Map()
	}
	if w.Body == nil {
		w.Body = []byte{}
	}
	return w
}

// timeArg is a TIME flag: RFC 3339 (2026-01-02T15:04:05Z), Unix milliseconds (1767366245000),
// "now", or a duration relative to now (-1h, -30m, +5m).
type timeArg struct {
	ms  int64
	set bool
}

func (t *timeArg) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	ms, err := parseTimeArg(s, time.Now())
	if err != nil {
		return err
	}
	t.ms, t.set = ms, true
	return nil
}

// parseTimeArg parses a TIME relative to now, in Unix ms.
func parseTimeArg(s string, now time.Time) (int64, error) {
	switch {
	case s == "now":
		return now.UnixMilli(), nil
	case s != "" && strings.Trim(s, "0123456789") == "":
		ms, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return ms, nil
		}
	case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+"):
		if d, err := time.ParseDuration(s); err == nil {
			return now.Add(d).UnixMilli(), nil
		}
	default:
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("bad time %q: want RFC 3339 (2026-01-02T15:04:05Z), Unix milliseconds, now, "+
		"or a duration relative to now (-1h, -30m: write --flag=-1h)", s)
}

// validMsgID checks the form of an offset message id (32 or 56 hex digits).
func validMsgID(id string) error {
	if _, _, err := commitlog.ParseOffsetMsgID(id); err != nil {
		return fmt.Errorf("malformed message id %q: want an offset message id (32 hex digits, or 56 for an IPv6 store host), as in an ack's msgId", id)
	}
	return nil
}

// queueList formats queue ids as "0, 1, 2".
func queueList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ", ")
}

// kongExit is kong's exit function. kong exits with 80 on a usage error (its "semantic" code)
// and 1 on other parse errors; the engine's usage errors exit 2, as the package doc says.
// kong calls it only while parsing (and with 0 after --help).
func kongExit(code int) {
	if code != 0 {
		code = readUsageExit
	}
	os.Exit(code)
}
