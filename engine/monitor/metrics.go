package monitor

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rocketstore/engine/internal/wire"
)

// Metrics (pull model): the monitor's collector reads Engine.Stats and a few cheap accessors
// on every scrape, so nothing runs on the hot path for them. The one exception
// is the pair of CommitLog sync histograms, which need every sample: the flusher's OnSync
// observes them once per sync (two atomic histogram updates next to an msync).
//
// Naming follows Prometheus' conventions (USERS-AND-PEERS §3.4): one prefix, base units
// (_seconds, _bytes, _ratio), counters end in _total, build metadata in _info. No label takes
// an unbounded set of values: the labels are reply codes, stages, fixed kinds and the ingress
// worker index (GOMAXPROCS of them by default); topic and group only where a bound caps them
// (the 1,024 topics of dropped messages, the 100 most lagging groups: groups.go).

const metricPrefix = "rocketstore_"

// Sync histogram buckets: msync of a few pages takes tens of microseconds on NVMe and tens of
// milliseconds on slow disks; a group can be one record or the whole MaxDispatchLag.
var (
	syncDurationBuckets = []float64{
		0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10,
	}
	syncSizeBuckets = prometheus.ExponentialBuckets(1<<10, 4, 11) // 1 KiB .. 1 GiB
)

// SyncDurationBuckets are the upper bounds of the sync duration histogram's buckets (+Inf
// aside).
func SyncDurationBuckets() []float64 { return slices.Clone(syncDurationBuckets) }

var (
	syncDurationOpts = prometheus.HistogramOpts{
		Name:    metricPrefix + "commitlog_sync_duration_seconds",
		Help:    "Time each CommitLog sync (msync of the dirty pages; one releases every waiter below it) took.",
		Buckets: syncDurationBuckets,
	}
	syncSizeOpts = prometheus.HistogramOpts{
		Name:    metricPrefix + "commitlog_sync_size_bytes",
		Help:    "Bytes each CommitLog sync made durable (the group commit's size).",
		Buckets: syncSizeBuckets,
	}
)

// SyncMetrics are an engine's CommitLog sync histograms. The engine makes them when it starts
// and feeds them from the flusher (Observe), so that a monitor attached later shows every sync.
type SyncMetrics struct {
	duration, size prometheus.Histogram
}

// NewSyncMetrics makes empty sync histograms.
func NewSyncMetrics() *SyncMetrics {
	return &SyncMetrics{duration: prometheus.NewHistogram(syncDurationOpts), size: prometheus.NewHistogram(syncSizeOpts)}
}

// Observe records one sync: how long it took and how many bytes it made durable (the flusher's
// OnSync).
func (m *SyncMetrics) Observe(d time.Duration, bytes int64) {
	m.duration.Observe(d.Seconds())
	m.size.Observe(float64(bytes))
}

// Totals are the syncs observed so far and the time they took together (for rates over an
// interval: the console's flush latency).
func (m *SyncMetrics) Totals() (syncs uint64, seconds float64) {
	s := histogramSums(m.duration)
	return s.count, s.sum
}

// The families the collector reports, besides the sync histograms.
var (
	descBuildInfo = newDesc("build_info", "Build metadata; the value is 1.", "version", "goversion", "revision")
	descUp        = newDesc("up", "1 while a store is open and its pipeline runs; 0 while starting or recovering and after it stopped.")
	descReady     = newDesc("ready", "1 while the engine takes writes (as /readyz): running, writes not refused, NATS connected.")
	descPhase     = newDesc("phase", "The monitor's phase: 1 for the current one, 0 for the others.", "phase")

	descOffset        = newDesc("commitlog_offset_bytes", "CommitLog positions: written (appender), durable (synced), dispatched (in ConsumeQueues and IndexFiles), min (first byte kept).", "offset")
	descDispatchLag   = newDesc("dispatch_lag_bytes", "Bytes written but not yet dispatched to the ConsumeQueues and IndexFiles (written - dispatched).")
	descFlushLag      = newDesc("flush_lag_bytes", "Bytes written but not yet synced (written - durable).")
	descInbox         = newDesc("append_inbox_batches", "Batches waiting in the appender's inbox.")
	descInboxCap      = newDesc("append_inbox_capacity_batches", "Capacity of the appender's inbox (Options.AppendInbox); a full inbox blocks ingress.")
	descAckQueue      = newDesc("ack_queue_batches", "Appended batches waiting for their acks.")
	descAckQueueCap   = newDesc("ack_queue_capacity_batches", "Capacity of the ack queue (Options.AckQueue); a full one blocks the appender.")
	descRecords       = newDesc("append_records_total", "Records (messages) the appender stored.")
	descBytes         = newDesc("append_bytes_total", "Bytes the appender stored in the CommitLog.")
	descBatches       = newDesc("append_batches_total", "Batches the appender took.")
	descDuplicates    = newDesc("append_duplicates_total", "Messages answered from the dedupe window (same Nats-Msg-Id) and not stored again.")
	descAppendErrors  = newDesc("append_errors_total", "Records the appender did not store (writes refused on a full disk, or a failed append).")
	descDedupeSize    = newDesc("dedupe_window_ids", "Message ids held in the dedupe window's memory.")
	descDedupeEvicted = newDesc("dedupe_evicted_early_total", "Message ids dropped from the dedupe window's memory before their window ended (--dedupe-max reached): with an IndexFile their retries are found there (dedupe_store_lookups_total), without one they are forgotten.")
	descDedupeLookups = newDesc("dedupe_store_lookups_total", "Message ids looked up in the IndexFile for the dedupe window, by the stage: ingress (after a restart, and while ids past --dedupe-max are within their window) or append (the writer: a record ingress did not look up).", "stage")
	descDedupeFound   = newDesc("dedupe_store_duplicates_total", "Duplicates those lookups found: answered with the first copy's position, not stored again.", "stage")
	descSyncs         = newDesc("commitlog_syncs_total", "CommitLog syncs.")
	descDiskUsed      = newDesc("disk_used_ratio", "Used fraction of the store's file system at the last check, rounded up to whole percent (absent while unknown).")
	descDiskFree      = newDesc("disk_free_bytes", "Bytes available to the engine on the CommitLog's file system.")
	descDiskSize      = newDesc("disk_size_bytes", "Size of the CommitLog's file system.")
	descDiskThreshold = newDesc("disk_threshold_ratio", "Disk use thresholds: clean_any_hour (DiskMaxUsedRatio), clean_forcibly (DiskCleanForciblyRatio), refuse_writes (DiskWarningRatio).", "threshold")
	descRefusing      = newDesc("refusing_writes", "1 while writes are refused because the disk use is above DiskWarningRatio.")
	descDeletedFiles  = newDesc("retention_deleted_files_total", "Files retention deleted, by kind: commitlog (segments), consumequeue, index.", "kind")
	descDeletedBytes  = newDesc("retention_deleted_bytes_total", "Bytes of CommitLog segments retention deleted.")
	descSegments      = newDesc("commitlog_segments", "CommitLog segment files.")
	descSegmentSize   = newDesc("commitlog_segment_size_bytes", "Size of each CommitLog segment file.")
	descQueues        = newDesc("consumequeues", "ConsumeQueues (topic, queue id).")
	descQueuesMapped  = newDesc("consumequeues_mapped", "ConsumeQueues whose files are mapped now.")
	descIndexFiles    = newDesc("index_files", "IndexFiles.")
	descRecDuration   = newDesc("recovery_duration_seconds", "How long the last recovery (Open) took.")
	descRecRecords    = newDesc("recovery_records", "Records the last recovery scanned and re-dispatched.")
	descRecBytes      = newDesc("recovery_bytes", "Bytes the last recovery scanned and re-dispatched.")
	descRecCut        = newDesc("recovery_cut_bytes", "Bytes the last recovery dropped after the log's valid end (a torn tail).")
	descReadCRC       = newDesc("read_crc_failures_total", "Reads refused because a record failed its CRC check: the record is damaged on disk and is never served (engine verify reports it).")
	descRecClean      = newDesc("recovery_clean_exit", "1 if the run before the last recovery stopped cleanly.")

	descReceived      = newDesc("ingress_received_messages_total", "Messages NATS delivered to ingress.")
	descExcluded      = newDesc("ingress_excluded_messages_total", "Messages ingress excluded (never stored).")
	descNoResponders  = newDesc("ingress_no_responders_total", "Requests on subjects ingress never stores ($-subjects, _INBOX.>) that nobody else receives, answered with NATS's no-responders status (embedded server only).")
	descEncoded       = newDesc("ingress_encoded_records_total", "Records ingress encoded and handed to the appender.")
	descRefused       = newDesc("ingress_refused_messages_total", "Messages not stored, by the code of their error reply and the stage that refused them: ingress (invalid, too large) or store (disk full, closed, failed).", "code", "stage")
	descAborted       = newDesc("ingress_aborted_messages_total", "Messages ingress held when it was aborted (answered 503).")
	descDropped       = newDesc("ingress_dropped_messages_total", "Fire-and-forget messages dropped: by ingress (its pending limits reached; by topic in ingress_dropped_by_topic_total), or by the NATS client (slow consumer), or still buffered when a subscription closed without a drain.")
	descDroppedTopic  = newDesc("ingress_dropped_by_topic_total", "Fire-and-forget messages ingress dropped, its pending limits reached, by topic (past 1024 topics, the rest under _other).", "topic")
	descSlowConsumer  = newDesc("ingress_slow_consumer_events_total", "Times a subscription became a slow consumer.")
	descAcks          = newDesc("ingress_acks_total", "Acks published.")
	descErrorReplies  = newDesc("ingress_error_replies_total", "Error replies published.")
	descReplyFailures = newDesc("ingress_reply_failures_total", "Replies that could not be published.")
	descPending       = newDesc("ingress_pending_messages", "Messages the NATS client buffers for the subscriptions.")
	descWorkerQueue   = newDesc("ingress_worker_queue_messages", "Messages waiting in each ingress worker's channel.", "worker")
	descSubjectCache  = newDesc("ingress_subject_cache_entries", "Subjects in ingress' subject -> topic cache.")
	descCacheEvict    = newDesc("ingress_subject_cache_evictions_total", "Evictions from ingress' subject cache.")
	descRuleTopics    = newDesc("ingress_rule_topics", "Topics the subject rule has made or found in the store, counted against the topic limit (--max-topics).")
	descOverflow      = newDesc("ingress_overflow_routes_total", "Subjects routed to the overflow topic because the topic limit was reached (a subject again after its route left the cache counts again).")
	descNATSConnected = newDesc("nats_connected", "1 while the engine's NATS connection is connected.")
	descNATSReconnect = newDesc("nats_reconnects_total", "Reconnections of the engine's NATS connection.")
	descPartsOwned    = newDesc("partitions_owned", "Partitions this engine takes now (partitioned ingest; absent otherwise).")
	descReplFloor     = newDesc("replicated_floor_sequence", "Replicated mode: the stream sequence up to which a partition is durable here.", "partition")
)

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(metricPrefix+name, help, labels, nil)
}

// allDescs lists every family for Describe.
var allDescs = []*prometheus.Desc{
	descBuildInfo, descUp, descReady, descPhase,
	descOffset, descDispatchLag, descFlushLag, descInbox, descInboxCap, descAckQueue, descAckQueueCap,
	descRecords, descBytes, descBatches, descDuplicates, descAppendErrors, descDedupeSize, descSyncs,
	descDedupeEvicted, descDedupeLookups, descDedupeFound,
	descDiskUsed, descDiskFree, descDiskSize, descDiskThreshold, descRefusing, descDeletedFiles, descDeletedBytes,
	descSegments, descSegmentSize, descQueues, descQueuesMapped, descIndexFiles,
	descRecDuration, descRecRecords, descRecBytes, descRecCut, descRecClean, descReadCRC,
	descReceived, descExcluded, descNoResponders, descEncoded, descRefused, descAborted, descDropped, descDroppedTopic, descSlowConsumer,
	descAcks, descErrorReplies, descReplyFailures, descPending, descWorkerQueue, descSubjectCache, descCacheEvict, descRuleTopics, descOverflow,
	descNATSConnected, descNATSReconnect, descPartsOwned, descReplFloor,
	prometheus.NewHistogram(syncDurationOpts).Desc(), prometheus.NewHistogram(syncSizeOpts).Desc(),
}

// phases lists every Phase, for the phase state set.
var phases = []Phase{PhaseStarting, PhaseRecovering, PhaseRunning, PhaseStopping, PhaseStopped, PhaseFailed}

// replyCodes are the codes the refused family always reports (at 0 until one is counted), so
// that rates work from the first scrape.
var replyCodes = []int{wire.CodeInvalid, wire.CodeTooLarge, wire.CodeInternal, wire.CodeUnavailable, wire.CodeDiskFull}

// collector reads the monitor's target on every scrape.
type collector struct{ m *Monitor }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	for _, d := range groupDescs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descBuildInfo, 1, m.version, runtime.Version(), buildRevision)

	st := m.state()
	e := st.engine
	for _, p := range phases {
		gauge(descPhase, bool01(p == st.phase), string(p))
	}
	gauge(descUp, bool01(e != nil && st.phase != PhaseFailed && st.phase != PhaseStopped))
	gauge(descReady, bool01(st.ready))
	if e == nil {
		return
	}

	s := st.stats()
	gauge(descOffset, float64(s.Written), "written")
	gauge(descOffset, float64(s.Durable), "durable")
	gauge(descOffset, float64(s.Dispatched), "dispatched")
	gauge(descOffset, float64(s.MinOffset), "min")
	gauge(descDispatchLag, float64(s.DispatchLag))
	gauge(descFlushLag, float64(s.FlushLag))
	gauge(descInbox, float64(s.AppendInbox))
	gauge(descInboxCap, float64(s.AppendInboxCap))
	gauge(descAckQueue, float64(s.AckQueue))
	gauge(descAckQueueCap, float64(s.AckQueueCap))
	counter(descRecords, s.Records)
	counter(descBytes, s.Bytes)
	counter(descBatches, s.Batches)
	counter(descDuplicates, s.Duplicates)
	counter(descAppendErrors, s.AppendErrors)
	gauge(descDedupeSize, float64(s.DedupeSize))
	counter(descDedupeEvicted, s.DedupeEvicted)
	counter(descDedupeLookups, s.DedupeLookups, "append")
	counter(descDedupeFound, s.DedupeFound, "append")
	counter(descSyncs, s.Syncs)
	if sm := e.SyncMetrics(); sm != nil {
		sm.duration.Collect(ch)
		sm.size.Collect(ch)
	}

	if s.DiskUsedRatio >= 0 {
		gauge(descDiskUsed, s.DiskUsedRatio)
	}
	o := e.Store()
	if u, err := o.FS.DiskUsage(filepath.Join(o.Dir, "commitlog")); err == nil {
		gauge(descDiskFree, float64(u.Avail))
		gauge(descDiskSize, float64(u.Total))
	}
	ret := e.Retention() // the settings in force (SetRetention changes them)
	gauge(descDiskThreshold, ret.DiskMaxUsedRatio, "clean_any_hour")
	gauge(descDiskThreshold, ret.DiskCleanForciblyRatio, "clean_forcibly")
	gauge(descDiskThreshold, ret.DiskWarningRatio, "refuse_writes")
	gauge(descRefusing, bool01(s.RefusingWrites))
	counter(descDeletedFiles, s.SegmentsDeleted, "commitlog")
	counter(descDeletedFiles, s.ConsumeQueueFilesDeleted, "consumequeue")
	counter(descDeletedFiles, s.IndexFilesDeleted, "index")
	counter(descDeletedBytes, s.BytesDeleted)
	counter(descReadCRC, s.ReadCRCFailures)

	if f, err := e.FileCounts(); err == nil {
		gauge(descSegments, float64(f.Segments))
		gauge(descQueues, float64(f.ConsumeQueues))
		gauge(descQueuesMapped, float64(f.ConsumeQueuesMapped))
		gauge(descIndexFiles, float64(f.IndexFiles))
	}
	gauge(descSegmentSize, float64(o.SegmentSize))

	r := e.Recovery()
	gauge(descRecDuration, r.Took.Seconds())
	gauge(descRecRecords, float64(r.Records))
	gauge(descRecBytes, float64(r.Bytes))
	gauge(descRecCut, float64(r.Cut))
	gauge(descRecClean, bool01(r.CleanExit))

	if in := s.Ingress; in != nil {
		counter(descReceived, in.Received)
		counter(descExcluded, in.Excluded)
		counter(descNoResponders, in.NoResponders)
		counter(descEncoded, in.Encoded)
		for stage, byCode := range map[string]map[int]int64{"ingress": in.Rejected, "store": in.Failed} {
			for _, code := range replyCodes {
				counter(descRefused, byCode[code], strconv.Itoa(code), stage)
			}
			for code, n := range byCode { // a code added to ingress later
				if !isReplyCode(code) {
					counter(descRefused, n, strconv.Itoa(code), stage)
				}
			}
		}
		counter(descAborted, in.Aborted)
		counter(descDropped, in.Dropped)
		for topic, n := range in.DroppedByTopic {
			counter(descDroppedTopic, n, topic)
		}
		counter(descSlowConsumer, in.SlowConsumerEvents)
		counter(descAcks, in.AcksSent)
		counter(descErrorReplies, in.ErrorReplies)
		counter(descReplyFailures, in.ReplyFailures)
		gauge(descPending, float64(in.Pending))
		for i, d := range in.WorkerDepth {
			gauge(descWorkerQueue, float64(d), strconv.Itoa(i))
		}
		gauge(descSubjectCache, float64(in.Routes.Cached))
		counter(descCacheEvict, in.Routes.Evictions)
		gauge(descRuleTopics, float64(in.Routes.RuleTopics))
		counter(descOverflow, in.Routes.Overflowed)
		counter(descDedupeLookups, in.StoreLookups, "ingress")
		counter(descDedupeFound, in.StoreDuplicates, "ingress")
	}
	if st.server == nil {
		return
	}
	if nc := st.server.NATSConn(); nc != nil {
		gauge(descNATSConnected, bool01(nc.IsConnected()))
		counter(descNATSReconnect, int64(nc.Stats().Reconnects))
	}
	if in := st.server.Ingress(); in != nil {
		if p := in.Partitions(); p != nil {
			gauge(descPartsOwned, float64(len(p.OwnedNow())))
		}
		for part, f := range in.ReplicatedFloors() {
			gauge(descReplFloor, float64(f), strconv.Itoa(part))
		}
	}
	collectGroups(st.server, ch)
}

func isReplyCode(code int) bool {
	for _, c := range replyCodes {
		if c == code {
			return true
		}
	}
	return false
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// buildRevision is the VCS revision the binary was built from, when the build recorded it.
var buildRevision = func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}()

// stats are the engine's counters, with ingress's when served.
func (st monitorState) stats() Stats {
	s := st.engine.Stats()
	if st.server != nil {
		if in := st.server.Ingress(); in != nil {
			is := in.Stats()
			s.Ingress = &is
		}
	}
	return s
}
