package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/stages/ingress"
)

// The monitoring server: an HTTP listener, separate from NATS, for Prometheus, health checks,
// a JSON status page and (opt-in) pprof.
//
//	/metrics        Prometheus text format (metrics.go), read from the stats on each scrape
//	/healthz        200 "ok" while the process runs; 503 once the engine stopped with an error
//	/readyz         200 "ok" while the engine takes writes; 503 with the reason otherwise:
//	                starting or recovering, writes refused (disk full), NATS disconnected,
//	                stopping, stopped, failed
//	/status, /      JSON status, like nats-server's /varz
//	/debug/pprof/   net/http/pprof, only with MonitorOptions.Pprof (404 otherwise)
//
// The monitor can start before the store is open, so that an orchestrator sees the process
// alive (/healthz) but not ready (/readyz: "recovering") while recovery runs:
//
//	mon, err := engine.StartMonitor(nil, addr, engine.MonitorOptions{Version: v, StoreDir: dir})
//	srv, err := engine.Serve(opts, nopts) // on error: mon.Fail(err)
//	mon.Attach(srv)                       // ready from here on
//	...
//	mon.SetPhase(engine.PhaseStopping, "signal") // not ready while draining
//	srv.Shutdown()
//	mon.Close()

// Phase is where the monitored engine is in its life.
type Phase string

// Phases. Only PhaseRunning can be ready.
const (
	// PhaseStarting: nothing attached yet, before the store is opened.
	PhaseStarting Phase = "starting"
	// PhaseRecovering: the store is being opened (lock, recovery) and NATS connected. The
	// phase of a monitor started without a target.
	PhaseRecovering Phase = "recovering"
	// PhaseRunning: attached and taking writes (unless the disk is full or NATS is down).
	PhaseRunning Phase = "running"
	// PhaseStopping: a shutdown is draining the pipeline.
	PhaseStopping Phase = "stopping"
	// PhaseStopped: the pipeline stopped cleanly (or was aborted).
	PhaseStopped Phase = "stopped"
	// PhaseFailed: the engine stopped with an error, or could not be opened (Fail).
	PhaseFailed Phase = "failed"
)

// MonitorOptions configure the monitoring server.
type MonitorOptions struct {
	// Version is the engine's version, for rocketstore_build_info and /status ("dev" if empty).
	Version string
	// StoreDir is the store directory /status shows before an engine is attached.
	StoreDir string
	// Pprof serves net/http/pprof under /debug/pprof/. Off, those paths are 404. Profiles
	// expose the process' internals: serve them only on a trusted address.
	Pprof bool
	// Logger logs the HTTP server's and the metrics handler's errors.
	Logger zerolog.Logger
	// ShutdownTimeout bounds Close's wait for the requests under way (5 s).
	ShutdownTimeout time.Duration
}

// Monitor is a running monitoring server.
type Monitor struct {
	opts    MonitorOptions
	version string
	started time.Time
	ln      net.Listener
	http    *http.Server
	reg     *prometheus.Registry
	handler http.Handler
	served  chan error // Serve's result

	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	phase  Phase
	reason string
	server *Server
	engine *Engine
	failed error
}

// StartMonitor serves the monitoring endpoints on addr (host:port; port 0 picks one, see
// Addr) for s. With s nil the monitor starts in PhaseRecovering and is not ready until Attach.
func StartMonitor(s *Server, addr string, opts MonitorOptions) (*Monitor, error) {
	m, err := listenMonitor(addr, opts)
	if err != nil {
		return nil, err
	}
	if s != nil {
		m.Attach(s)
	}
	return m, nil
}

// StartEngineMonitor is StartMonitor for an engine without NATS (Open, Put): no ingress or
// connection metrics. With e nil it starts in PhaseRecovering, until AttachEngine.
func StartEngineMonitor(e *Engine, addr string, opts MonitorOptions) (*Monitor, error) {
	m, err := listenMonitor(addr, opts)
	if err != nil {
		return nil, err
	}
	if e != nil {
		m.AttachEngine(e)
	}
	return m, nil
}

func listenMonitor(addr string, opts MonitorOptions) (*Monitor, error) {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	m := &Monitor{
		opts:    opts,
		version: cmp.Or(opts.Version, "dev"),
		started: time.Now(),
		phase:   PhaseRecovering,
		reason:  "opening the store (lock, recovery)",
		served:  make(chan error, 1),
	}
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(
		collector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("monitor: listen on %s: %w", addr, err)
	}
	m.ln = ln
	m.handler = m.newHandler()
	m.http = &http.Server{
		Handler:           m.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: a CPU profile streams for as long as it is asked to.
		ErrorLog: stdlog.New(opts.Logger.With().Str("component", "monitor").Logger(), "", 0),
	}
	go func() {
		err := m.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			m.opts.Logger.Error().Err(err).Str("addr", m.Addr()).Msg("monitor: http server stopped")
		}
		m.served <- err
	}()
	m.opts.Logger.Info().Str("addr", m.Addr()).Bool("pprof", opts.Pprof).Msg("monitor listening")
	return m, nil
}

// Addr is the address the monitor listens on (with the port chosen for port 0).
func (m *Monitor) Addr() string { return m.ln.Addr().String() }

// URL is http://Addr.
func (m *Monitor) URL() string { return "http://" + m.Addr() }

// Registry is the monitor's Prometheus registry: register further collectors on it.
func (m *Monitor) Registry() *prometheus.Registry { return m.reg }

// Attach makes s the monitored server and the phase PhaseRunning.
func (m *Monitor) Attach(s *Server) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.server, m.engine = s, s.Engine
	m.phase, m.reason = PhaseRunning, ""
}

// AttachEngine makes e the monitored engine (no NATS) and the phase PhaseRunning.
func (m *Monitor) AttachEngine(e *Engine) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.server, m.engine = nil, e
	m.phase, m.reason = PhaseRunning, ""
}

// SetPhase sets the phase and why (shown by /readyz and /status): PhaseStarting or
// PhaseRecovering before Attach, PhaseStopping when a shutdown begins. An engine that has
// stopped overrides it (stopped, or failed with its error).
func (m *Monitor) SetPhase(p Phase, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase, m.reason = p, reason
}

// Fail marks the monitor failed: /healthz answers 503 with err from now on. For an engine that
// could not be opened; an attached engine that stops with an error is seen without it.
func (m *Monitor) Fail(err error) {
	if err == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = err
}

// Shutdown stops the monitor gracefully: no new connections, and the requests under way
// finish (until ctx ends; then they are cut). Later calls return the first one's result.
func (m *Monitor) Shutdown(ctx context.Context) error {
	m.closeOnce.Do(func() {
		err := m.http.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, m.http.Close())
		}
		m.closeErr = errors.Join(err, <-m.served)
	})
	return m.closeErr
}

// Close is Shutdown bounded by MonitorOptions.ShutdownTimeout.
func (m *Monitor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ShutdownTimeout)
	defer cancel()
	return m.Shutdown(ctx)
}

// monitorState is the monitor's view at one moment.
type monitorState struct {
	phase  Phase
	reason string // why the phase (not running), or why not ready
	server *Server
	engine *Engine
	ready  bool
	failed error // set in PhaseFailed
}

// state derives the phase and readiness: an attached engine whose pipeline stopped is stopped
// or failed whatever the phase set; a running one is ready when it takes writes (Engine.Ready:
// not closing, disk not full) and, served, its NATS connection is up.
func (m *Monitor) state() monitorState {
	m.mu.Lock()
	st := monitorState{phase: m.phase, reason: m.reason, server: m.server, engine: m.engine, failed: m.failed}
	m.mu.Unlock()
	if st.failed != nil {
		st.phase, st.reason = PhaseFailed, st.failed.Error()
		return st
	}
	e := st.engine
	if e == nil {
		return st
	}
	select {
	case <-e.Done():
		if err := e.Err(); stoppedWithError(err) {
			st.phase, st.reason, st.failed = PhaseFailed, "the engine stopped: "+err.Error(), err
		} else {
			st.phase, st.reason = PhaseStopped, "the engine has stopped"
		}
		return st
	default:
	}
	if st.phase != PhaseRunning {
		return st
	}
	if err := e.Ready(); err != nil {
		var full *DiskFullError
		if errors.As(err, &full) {
			st.reason = "refusing writes: " + err.Error()
		} else {
			st.reason = "not taking writes: " + err.Error()
		}
		return st
	}
	if s := st.server; s != nil && s.conn != nil && !s.conn.IsConnected() {
		st.reason = "nats connection " + s.conn.Status().String()
		return st
	}
	if s := st.server; s != nil {
		if err := s.replicatedNotReady(); err != nil {
			st.reason = err.Error()
			return st
		}
	}
	st.ready = true
	return st
}

// Handler is the monitor's HTTP handler (to mount it on another server as well).
func (m *Monitor) Handler() http.Handler { return m.handler }

func (m *Monitor) newHandler() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{m.opts.Logger},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: 4,
	})
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(m.reg, metrics))
	mux.HandleFunc("GET /healthz", m.healthz)
	mux.HandleFunc("GET /readyz", m.readyz)
	mux.HandleFunc("GET /status", m.statusPage)
	mux.HandleFunc("GET /{$}", m.statusPage)
	if m.opts.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (m *Monitor) healthz(w http.ResponseWriter, _ *http.Request) {
	if st := m.state(); st.phase == PhaseFailed {
		plain(w, http.StatusServiceUnavailable, "failed: "+st.reason)
		return
	}
	plain(w, http.StatusOK, "ok")
}

func (m *Monitor) readyz(w http.ResponseWriter, _ *http.Request) {
	st := m.state()
	if st.ready {
		plain(w, http.StatusOK, "ok")
		return
	}
	msg := string(st.phase)
	if st.reason != "" {
		msg += ": " + st.reason
	}
	plain(w, http.StatusServiceUnavailable, msg)
}

func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

func (m *Monitor) statusPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // subjects: ">" as is
	if err := enc.Encode(m.Status()); err != nil {
		m.opts.Logger.Debug().Err(err).Msg("monitor: writing /status")
	}
}

// promLogger adapts zerolog to promhttp's error log.
type promLogger struct{ log zerolog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn().Msg("monitor: metrics: " + fmt.Sprint(v...)) }

// Status is the /status page (nats-server's /varz style, snake_case JSON).
type Status struct {
	Version   string    `json:"version"`
	GoVersion string    `json:"go"`
	Revision  string    `json:"revision,omitempty"`
	Start     time.Time `json:"start"`
	Now       time.Time `json:"now"`
	Uptime    string    `json:"uptime"`
	// UptimeSeconds is the monitor's (about the process') uptime.
	UptimeSeconds float64 `json:"uptime_seconds"`
	Phase         Phase   `json:"phase"`
	// Ready and Healthy are what /readyz and /healthz answer; Reason says why not ready.
	Ready   bool   `json:"ready"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`

	StoreDir  string `json:"store_dir"`
	FlushMode string `json:"flush_mode,omitempty"`

	// The rest is set once an engine is attached.
	Offsets   *StatusOffsets   `json:"offsets,omitempty"`
	Lags      *StatusLags      `json:"lags,omitempty"`
	Queues    *StatusQueues    `json:"queues,omitempty"`
	Counters  *StatusCounters  `json:"counters,omitempty"`
	Sync      *StatusSync      `json:"sync,omitempty"`
	Disk      *StatusDisk      `json:"disk,omitempty"`
	Retention *StatusRetention `json:"retention,omitempty"`
	Files     *FileCounts      `json:"files,omitempty"`
	Recovery  *StatusRecovery  `json:"recovery,omitempty"`
	Ingress   *StatusIngress   `json:"ingress,omitempty"`
	NATS      *StatusNATS      `json:"nats,omitempty"`
}

// StatusOffsets are the CommitLog positions.
type StatusOffsets struct {
	Written    int64 `json:"written"`
	Durable    int64 `json:"durable"`
	Dispatched int64 `json:"dispatched"`
	// Sealed is the durable offset of the last checkpoint: damage below it is refused at
	// recovery, not cut.
	Sealed int64 `json:"sealed"`
	Min    int64 `json:"min"`
}

// StatusLags are in bytes.
type StatusLags struct {
	Dispatch int64 `json:"dispatch_bytes"`
	Flush    int64 `json:"flush_bytes"`
}

// StatusQueues are queue depths and bounds.
type StatusQueues struct {
	AppendInbox    int   `json:"append_inbox"`
	AppendInboxCap int   `json:"append_inbox_cap"`
	AckQueue       int   `json:"ack_queue"`
	AckQueueCap    int   `json:"ack_queue_cap"`
	IngressWorkers []int `json:"ingress_workers,omitempty"`
	NATSPending    int64 `json:"nats_pending"`
}

// StatusCounters are the appender's counters and the syncs.
type StatusCounters struct {
	Records        int64   `json:"records"`
	Bytes          int64   `json:"bytes"`
	Batches        int64   `json:"batches"`
	Duplicates     int64   `json:"duplicates"`
	AppendErrors   int64   `json:"append_errors"`
	DedupeSize     int     `json:"dedupe_size"`
	Syncs          int64   `json:"syncs"`
	SyncsPerRecord float64 `json:"syncs_per_record"`
}

// StatusSync summarizes the sync histograms.
type StatusSync struct {
	Count          uint64  `json:"count"`
	MeanSeconds    float64 `json:"mean_seconds"`
	MeanBytes      float64 `json:"mean_bytes"`
	TotalSeconds   float64 `json:"total_seconds"`
	TotalBytes     float64 `json:"total_bytes"`
	SlowSyncWarnAt string  `json:"slow_sync_warn_at"`
}

// StatusDisk is the store's file system.
type StatusDisk struct {
	UsedRatio      float64 `json:"used_ratio"` // -1: unknown
	TotalBytes     uint64  `json:"total_bytes,omitempty"`
	FreeBytes      uint64  `json:"free_bytes,omitempty"`
	RefusingWrites bool    `json:"refusing_writes"`
	RefuseAbove    float64 `json:"refuse_above_ratio"`
	CleanAbove     float64 `json:"clean_any_hour_above_ratio"`
	ForciblyAbove  float64 `json:"clean_forcibly_above_ratio"`
}

// StatusRetention is what retention deleted and its settings.
type StatusRetention struct {
	Enabled                  bool   `json:"enabled"`
	FileReservedTime         string `json:"file_reserved_time"`
	DeleteWhen               string `json:"delete_when"`
	DeleteFilesPerPass       int    `json:"delete_files_per_pass"`
	SegmentsDeleted          int64  `json:"segments_deleted"`
	BytesDeleted             int64  `json:"bytes_deleted"`
	ConsumeQueueFilesDeleted int64  `json:"consumequeue_files_deleted"`
	IndexFilesDeleted        int64  `json:"index_files_deleted"`
}

// StatusRecovery is the last Open's Recovery.
type StatusRecovery struct {
	CleanExit           bool     `json:"clean_exit"`
	FromCheckpoint      bool     `json:"from_checkpoint"`
	Start               int64    `json:"start"`
	End                 int64    `json:"end"`
	Records             int64    `json:"records"`
	Bytes               int64    `json:"bytes"`
	Tail                string   `json:"tail,omitempty"`
	Corrupt             string   `json:"corrupt,omitempty"`
	Cut                 int64    `json:"cut_bytes"`
	IndexDropped        []string `json:"index_dropped,omitempty"`
	IndexEntriesDropped int64    `json:"index_entries_dropped"`
	Took                string   `json:"took"`
	TookSeconds         float64  `json:"took_seconds"`
}

// StatusIngress are ingress' counters (ingress.Stats). Rejected and Failed count the messages
// not stored by the code of their error reply (as strings: JSON keys): refused by ingress, or
// not taken by the store.
type StatusIngress struct {
	Received           int64         `json:"received"`
	Excluded           int64         `json:"excluded"`
	Encoded            int64         `json:"encoded"`
	Rejected           map[int]int64 `json:"rejected"`
	Failed             map[int]int64 `json:"failed"`
	Aborted            int64         `json:"aborted"`
	Dropped            int64         `json:"dropped"`
	Pending            int64         `json:"pending"`
	SlowConsumerEvents int64         `json:"slow_consumer_events"`
	AcksSent           int64         `json:"acks"`
	ErrorReplies       int64         `json:"error_replies"`
	ReplyFailures      int64         `json:"reply_failures"`
	WorkerDepth        []int         `json:"worker_depth"`
	CachedSubjects     int           `json:"cached_subjects"`
	CacheEvictions     int64         `json:"cache_evictions"`
}

func statusIngress(in *ingress.Stats) *StatusIngress {
	return &StatusIngress{
		Received: in.Received, Excluded: in.Excluded, Encoded: in.Encoded, Rejected: in.Rejected, Failed: in.Failed,
		Aborted: in.Aborted, Dropped: in.Dropped, Pending: in.Pending, SlowConsumerEvents: in.SlowConsumerEvents,
		AcksSent: in.AcksSent, ErrorReplies: in.ErrorReplies, ReplyFailures: in.ReplyFailures,
		WorkerDepth: in.WorkerDepth, CachedSubjects: in.CachedSubjects, CacheEvictions: in.CacheEvictions,
	}
}

// Status returns what /status shows.
func (m *Monitor) Status() Status {
	now := time.Now()
	st := m.state()
	out := Status{
		Version: m.version, GoVersion: runtime.Version(), Revision: buildRevision,
		Start: m.started, Now: now, Uptime: now.Sub(m.started).Round(time.Second).String(),
		UptimeSeconds: now.Sub(m.started).Seconds(),
		Phase:         st.phase, Ready: st.ready, Healthy: st.phase != PhaseFailed,
		StoreDir: m.opts.StoreDir,
	}
	if !st.ready {
		out.Reason = st.reason
	}
	e := st.engine
	if e == nil {
		return out
	}
	o := e.opts
	out.StoreDir = o.Dir
	if abs, err := filepath.Abs(o.Dir); err == nil {
		out.StoreDir = abs
	}
	out.FlushMode = o.FlushMode.String()

	var s Stats
	if st.server != nil {
		s = st.server.Stats()
	} else {
		s = e.Stats()
	}
	out.Offsets = &StatusOffsets{Written: s.Written, Durable: s.Durable, Dispatched: s.Dispatched, Sealed: s.Sealed, Min: s.MinOffset}
	out.Lags = &StatusLags{Dispatch: s.DispatchLag, Flush: s.FlushLag}
	out.Queues = &StatusQueues{AppendInbox: s.AppendInbox, AppendInboxCap: s.AppendInboxCap, AckQueue: s.AckQueue, AckQueueCap: s.AckQueueCap}
	out.Counters = &StatusCounters{
		Records: s.Records, Bytes: s.Bytes, Batches: s.Batches, Duplicates: s.Duplicates,
		AppendErrors: s.AppendErrors, DedupeSize: s.DedupeSize, Syncs: s.Syncs, SyncsPerRecord: s.SyncsPerRecord,
	}
	if sm := e.syncMetrics; sm != nil {
		d, b := histogramSums(sm.duration), histogramSums(sm.size)
		out.Sync = &StatusSync{Count: d.count, TotalSeconds: d.sum, TotalBytes: b.sum, SlowSyncWarnAt: o.SlowSync.String()}
		if d.count > 0 {
			out.Sync.MeanSeconds = d.sum / float64(d.count)
		}
		if b.count > 0 {
			out.Sync.MeanBytes = b.sum / float64(b.count)
		}
	}
	ret := e.Retention() // the settings in force (SetRetention changes them)
	out.Disk = &StatusDisk{
		UsedRatio: s.DiskUsedRatio, RefusingWrites: s.RefusingWrites,
		RefuseAbove: ret.DiskWarningRatio, CleanAbove: ret.DiskMaxUsedRatio, ForciblyAbove: ret.DiskCleanForciblyRatio,
	}
	if u, err := o.FS.DiskUsage(filepath.Join(o.Dir, "commitlog")); err == nil {
		out.Disk.TotalBytes, out.Disk.FreeBytes = u.Total, u.Avail
	}
	out.Retention = &StatusRetention{
		Enabled: !ret.NoRetention, FileReservedTime: ret.FileReservedTime.String(), DeleteWhen: ret.DeleteWhen,
		DeleteFilesPerPass: ret.DeleteFilesPerPass, SegmentsDeleted: s.SegmentsDeleted, BytesDeleted: s.BytesDeleted,
		ConsumeQueueFilesDeleted: s.ConsumeQueueFilesDeleted, IndexFilesDeleted: s.IndexFilesDeleted,
	}
	if f, ok := e.fileCounts(); ok {
		out.Files = &f
	}
	r := e.Recovery()
	out.Recovery = &StatusRecovery{
		CleanExit: r.CleanExit, FromCheckpoint: r.FromCheckpoint, Start: r.Start, End: r.End,
		Records: r.Records, Bytes: r.Bytes, Tail: r.Tail, Corrupt: r.Corrupt, Cut: r.Cut,
		IndexDropped: r.IndexDropped, IndexEntriesDropped: r.IndexEntriesDropped,
		Took: r.Took.String(), TookSeconds: r.Took.Seconds(),
	}
	if in := s.Ingress; in != nil {
		out.Ingress = statusIngress(in)
		out.Queues.IngressWorkers = in.WorkerDepth
		out.Queues.NATSPending = in.Pending
	}
	if srv := st.server; srv != nil && srv.conn != nil {
		out.NATS = natsStatus(srv)
	}
	return out
}

type histSums struct {
	count uint64
	sum   float64
}

func histogramSums(h prometheus.Histogram) histSums {
	var pb dto.Metric
	if err := h.Write(&pb); err != nil || pb.Histogram == nil {
		return histSums{}
	}
	return histSums{count: pb.Histogram.GetSampleCount(), sum: pb.Histogram.GetSampleSum()}
}
