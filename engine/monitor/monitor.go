// Package monitor is the engine's HTTP monitor, an HTTP listener separate from NATS: /metrics
// (Prometheus), /healthz, /readyz, the JSON status page (/status) and, opt-in, pprof. It owns
// the status types, the metric families and the CommitLog sync histograms, and declares what
// it reads of an engine (Engine) and of its NATS side (Server).
package monitor

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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/retention"
)

// The endpoints:
//
//	/metrics        Prometheus text format (metrics.go), read from the stats on each scrape
//	/healthz        200 "ok" while the process runs; 503 once the engine stopped with an error
//	/readyz         200 "ok" while the engine takes writes; 503 with the reason otherwise:
//	                starting or recovering, writes refused (disk full), NATS disconnected,
//	                stopping, stopped, failed
//	/status, /      JSON status, like nats-server's /varz
//	/debug/pprof/   net/http/pprof, only with Options.Pprof (404 otherwise)
//	/console/       the console in the browser, with Options.Console (engine/console)
//
// The monitor can start before the store is open, so that an orchestrator sees the process
// alive (/healthz) but not ready (/readyz: "recovering") while recovery runs:
//
//	mon, err := monitor.Start(addr, monitor.Options{Version: v, StoreDir: dir})
//	srv, err := engine.Serve(opts, nopts) // on error: mon.Fail(err)
//	mon.Attach(srv.Engine, srv)           // ready from here on
//	...
//	mon.SetPhase(monitor.PhaseStopping, "signal") // not ready while draining
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

// Options configure the monitoring server.
type Options struct {
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
	// Console, when set, is served under /console/ (engine/console: it checks credentials
	// itself).
	Console http.Handler
}

// Monitor is a running monitoring server.
type Monitor struct {
	opts    Options
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
	server Server
	engine Engine
	failed error
}

// Start serves the monitoring endpoints on addr (host:port; port 0 picks one, see Addr). The
// monitor starts in PhaseRecovering and is not ready until Attach.
func Start(addr string, opts Options) (*Monitor, error) {
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

// Attach makes e the monitored engine, served over NATS by s (nil for an engine without NATS:
// no ingress or connection metrics), and the phase PhaseRunning.
func (m *Monitor) Attach(e Engine, s Server) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.server, m.engine = s, e
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

// Close is Shutdown bounded by Options.ShutdownTimeout.
func (m *Monitor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ShutdownTimeout)
	defer cancel()
	return m.Shutdown(ctx)
}

// monitorState is the monitor's view at one moment.
type monitorState struct {
	phase  Phase
	reason string // why the phase (not running), or why not ready
	server Server
	engine Engine
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
		if err := e.Failure(); err != nil {
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
		var full *retention.DiskFullError
		if errors.As(err, &full) {
			st.reason = "refusing writes: " + err.Error()
		} else {
			st.reason = "not taking writes: " + err.Error()
		}
		return st
	}
	if s := st.server; s != nil {
		if nc := s.NATSConn(); nc != nil && !nc.IsConnected() {
			st.reason = "nats connection " + nc.Status().String()
			return st
		}
		if in := s.Ingress(); in != nil {
			if err := in.ReplicatedReady(); err != nil {
				st.reason = err.Error()
				return st
			}
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
	if m.opts.Console != nil {
		mux.Handle("/console/", m.opts.Console)
		mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	}
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
	if st.phase == PhaseStopping && st.engine != nil {
		// What a stop still does (bounded by --dispatch-stop-timeout): the ConsumeQueues and
		// IndexFiles of what is stored, the rest left to the next start.
		if lag := st.stats().DispatchLag; lag > 0 {
			msg += fmt.Sprintf("; dispatch backlog %d bytes", lag)
		}
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
