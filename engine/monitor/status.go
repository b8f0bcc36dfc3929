package monitor

import (
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rocketstore/engine/stages/ingress"
)

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
	Groups    *StatusGroups    `json:"groups,omitempty"`
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
	DedupeEvicted  int64   `json:"dedupe_evicted_early"`
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
	RuleTopics         int           `json:"rule_topics"`
	MaxTopics          int           `json:"max_topics"`
	OverflowRoutes     int64         `json:"overflow_routes"`
}

func statusIngress(in *ingress.Stats) *StatusIngress {
	return &StatusIngress{
		Received: in.Received, Excluded: in.Excluded, Encoded: in.Encoded, Rejected: in.Rejected, Failed: in.Failed,
		Aborted: in.Aborted, Dropped: in.Dropped, Pending: in.Pending, SlowConsumerEvents: in.SlowConsumerEvents,
		AcksSent: in.AcksSent, ErrorReplies: in.ErrorReplies, ReplyFailures: in.ReplyFailures,
		WorkerDepth: in.WorkerDepth, CachedSubjects: in.Routes.Cached, CacheEvictions: in.Routes.Evictions,
		RuleTopics: in.Routes.RuleTopics, MaxTopics: in.Routes.MaxTopics, OverflowRoutes: in.Routes.Overflowed,
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
	o := e.Store()
	out.StoreDir = o.Dir
	if abs, err := filepath.Abs(o.Dir); err == nil {
		out.StoreDir = abs
	}
	out.FlushMode = o.FlushMode
	s := st.stats()
	out.Offsets = &StatusOffsets{Written: s.Written, Durable: s.Durable, Dispatched: s.Dispatched, Sealed: s.Sealed, Min: s.MinOffset}
	out.Lags = &StatusLags{Dispatch: s.DispatchLag, Flush: s.FlushLag}
	out.Queues = &StatusQueues{AppendInbox: s.AppendInbox, AppendInboxCap: s.AppendInboxCap, AckQueue: s.AckQueue, AckQueueCap: s.AckQueueCap}
	out.Counters = &StatusCounters{
		Records: s.Records, Bytes: s.Bytes, Batches: s.Batches, Duplicates: s.Duplicates,
		AppendErrors: s.AppendErrors, DedupeSize: s.DedupeSize, DedupeEvicted: s.DedupeEvicted, Syncs: s.Syncs, SyncsPerRecord: s.SyncsPerRecord,
	}
	if sm := e.SyncMetrics(); sm != nil {
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
	if f, err := e.FileCounts(); err == nil {
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
	if srv := st.server; srv != nil && srv.NATSConn() != nil {
		out.NATS = NATSStatus(srv)
		out.Groups = statusGroups(srv)
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
