// Package console is the engine's console in the browser, served on the monitor's --http
// address under /console/: an overview with live charts, the topics and their queues, the
// consumer groups, and message search, each view at a URL of its own. It is plain HTML, CSS and
// JavaScript embedded in the binary (assets/), over a JSON API under /console/api/ that reads the
// engine directly (engine.Engine's reads, the consumer group coordinator, the routing in force).
//
// It is read-only unless Options.Actions enables the state-changing requests (resetting and
// deleting a consumer group), which then also need the credentials, a same-origin request and
// the session's token (access.go). A sampler (samples.go) keeps the last minutes of rates, so
// that a chart has its history when a page opens.
package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/engine/monitor"
)

// Defaults of Options.
const (
	DefaultInterval = time.Second
	DefaultHistory  = 600 // ten minutes of one-second samples
	DefaultUser     = "admin"
)

// Options configure a Console.
type Options struct {
	// Addr is the --http address the console is served on: unless its host is a loopback
	// address (or localhost), every request needs Password.
	Addr string
	// User and Password are the credentials (HTTP basic authentication); with a Password set,
	// every request needs them, whatever the address. User defaults to DefaultUser.
	User, Password string
	// Actions enables the requests that change state (reset or delete a consumer group). They
	// also need Password: New refuses Actions without it.
	Actions bool
	// Status is the monitor's status (phase, readiness and why, disk, files, retention); SetStatus
	// sets it later (the monitor serves the console, so it starts after it is made).
	Status func() monitor.Status
	// Interval and History are the sampler's period and how many samples it keeps.
	Interval time.Duration
	History  int
	Logger   zerolog.Logger
}

// Store is what the console reads of a store (*engine.Engine is one).
type Store interface {
	Topics() []engine.TopicInfo
	QueueOffsets(topic string) ([]engine.QueueOffsets, error)
	Get(ctx context.Context, req engine.GetRequest) (engine.GetResult, error)
	Lookup(msgID string) (engine.ReadMessage, error)
	OffsetForTime(topic string, queueID int32, ts int64) (int64, error)
	SearchKey(ctx context.Context, req engine.KeySearchRequest) (engine.KeyPage, error)
}

// Groups is what the console reads and changes of the consumer groups (*engine.Server is one).
type Groups interface {
	GroupKeys() []groups.Key
	DescribeGroup(key groups.Key) (groups.GroupStatus, bool)
	ResetGroup(key groups.Key, to engine.GroupReset) ([]engine.QueueOffset, error)
	DeleteGroup(key groups.Key) (bool, error)
}

// Target is the engine a console shows.
type Target struct {
	Store Store
	// Stats are the pipeline's and ingress' counters; Syncs the CommitLog sync histograms
	// (nil: none).
	Stats func() monitor.Stats
	Syncs *monitor.SyncMetrics
	// Groups are the consumer groups (nil: none served); Routing the subject-to-topic rule
	// (nil: unknown); ReadRequests the read API's request count (nil: no read API).
	Groups       Groups
	Routing      func() engine.Routing
	ReadRequests func() int64
}

// ServerTarget is the Target of a served engine.
func ServerTarget(s *engine.Server) Target {
	return Target{Store: s.Engine, Stats: s.Stats, Syncs: s.Engine.SyncMetrics(), Groups: s, Routing: s.Routing,
		ReadRequests: s.ReadRequests}
}

// Console serves the console. Its methods are safe for concurrent use.
type Console struct {
	opts    Options
	access  *access
	handler http.Handler
	samples *ring
	ticks   <-chan time.Time // the sampler's clock; nil: a ticker of Interval (tests set it)

	mu     sync.Mutex
	target *Target
	status func() monitor.Status
}

// New makes a console; Attach gives it an engine and Run feeds its charts.
func New(opts Options) (*Console, error) {
	opts.User = cmp.Or(opts.User, DefaultUser)
	opts.Interval = cmp.Or(opts.Interval, DefaultInterval)
	opts.History = cmp.Or(opts.History, DefaultHistory)
	if opts.Actions && opts.Password == "" {
		return nil, errors.New("console: actions need a password (console_password): a request that changes state must carry credentials")
	}
	a, err := newAccess(opts)
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, access: a, samples: newRing(opts.History), status: opts.Status}
	c.handler = a.wrap(c.routes())
	return c, nil
}

// ServeHTTP serves the console under /console/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Attach makes t the engine shown.
func (c *Console) Attach(t Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target = &t
}

// SetStatus sets where the overview's status comes from (the monitor's Status).
func (c *Console) SetStatus(f func() monitor.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = f
}

// statusFunc is the status source, nil before one is set.
func (c *Console) statusFunc() func() monitor.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// attached is the engine shown, nil before Attach.
func (c *Console) attached() *Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.target
}

// RequiresCredentials says whether every request needs the password (set, or needed because the
// address is not loopback).
func (c *Console) RequiresCredentials() bool { return c.access.password != "" || !c.access.loopback }

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/assets/{file}", serveAsset)
	mux.HandleFunc("GET /console/api/session", c.session)
	mux.HandleFunc("GET /console/api/overview", c.overview)
	mux.HandleFunc("GET /console/api/samples", c.samplesAPI)
	mux.HandleFunc("GET /console/api/topics", c.topics)
	mux.HandleFunc("GET /console/api/topic", c.topic)
	mux.HandleFunc("GET /console/api/groups", c.groupList)
	mux.HandleFunc("GET /console/api/group", c.group)
	mux.HandleFunc("POST /console/api/group/reset", c.groupReset)
	mux.HandleFunc("POST /console/api/group/delete", c.groupDelete)
	mux.HandleFunc("GET /console/api/messages", c.messages)
	mux.HandleFunc("GET /console/api/message", c.message)
	mux.HandleFunc("GET /console/api/message/body", c.messageBody)
	unknown := func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no such console API: "+r.Method+" "+r.URL.Path)
	}
	mux.HandleFunc("GET /console/api/", unknown)
	mux.HandleFunc("POST /console/api/", unknown)
	mux.HandleFunc("GET /console/", serveIndex) // every view's URL is the page; its script routes
	return mux
}

// session tells the page who it is and what it may do, and gives it the token its requests that
// change state must carry.
func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	token := c.access.session(w, r)
	reply(w, map[string]any{
		"user": c.access.userOf(r), "actions": c.opts.Actions, "token": token,
		"credentials": c.RequiresCredentials(), "attached": c.attached() != nil,
	})
}

// reply writes v as JSON.
func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// fail writes the engine's error shape: {"error":{"code":N,"description":"..."}}.
func fail(w http.ResponseWriter, code int, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "description": description}})
}

// errNotAttached: the engine is not running yet (recovering) or no more.
var errNotAttached = errors.New("the engine is not running (starting, recovering, or stopped): the store cannot be read now")

// store is the attached engine's store, or a 503 answered.
func (c *Console) store(w http.ResponseWriter) (Store, bool) {
	t := c.attached()
	if t == nil || t.Store == nil {
		fail(w, http.StatusServiceUnavailable, errNotAttached.Error())
		return nil, false
	}
	return t.Store, true
}

// readError answers err of a read with its HTTP code.
func readError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, engine.ErrInvalidRequest), errors.Is(err, engine.ErrBadMsgID), errors.Is(err, errBadParam):
		fail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrUnknownQueue):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, engine.ErrIndexDisabled):
		fail(w, http.StatusConflict, "the store has no index (--no-index): no search by key or id; "+err.Error())
	case errors.Is(err, engine.ErrClosed):
		fail(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		fail(w, http.StatusServiceUnavailable, "the read was cut short: "+err.Error())
	default:
		fail(w, http.StatusInternalServerError, err.Error())
	}
}
