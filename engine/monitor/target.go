package monitor

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/recovery"
	"github.com/rocketstore/engine/engine/retention"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages/ingress"
)

// Engine is what the monitor reads of an engine (engine.Engine implements it).
type Engine interface {
	// Done is closed when the pipeline has stopped; Failure is then why, nil for a clean stop
	// or an abort.
	Done() <-chan struct{}
	Failure() error
	// Ready is nil while the engine takes writes.
	Ready() error
	Stats() Stats
	// Retention are the retention settings in force.
	Retention() retention.Settings
	FileCounts() (FileCounts, error)
	Recovery() recovery.Report
	// SyncMetrics are the CommitLog sync histograms the engine feeds (nil: none).
	SyncMetrics() *SyncMetrics
	Store() Store
}

// Server is what the monitor reads of the NATS side of a served engine (engine.Server
// implements it).
type Server interface {
	NATSConn() *nats.Conn
	Ingress() *ingress.Ingress
	NATSInfo() NATSInfo
}

// Store is the store an engine runs on, as the monitor shows it.
type Store struct {
	// Dir is the store directory, FS its file system (the disk gauges read the CommitLog's).
	Dir string
	FS  vfs.FS
	// FlushMode is what an ack promises (sync or async); SlowSync the sync time that is
	// logged; SegmentSize the CommitLog's segment size.
	FlushMode   string
	SlowSync    time.Duration
	SegmentSize int64
}

// NATSInfo is the configuration of a served engine's NATS side, as /status shows it.
type NATSInfo struct {
	// Embedded: the engine runs its own nats-server, with Clients client connections.
	Embedded bool
	Clients  int
	// Subjects stored and their QueueGroup, or the JetStream stream pulled from.
	Subjects        []string
	QueueGroup      string
	JetStreamStream string
	// OwnershipEngineID names this engine in the ownership bucket ("" without one).
	OwnershipEngineID string
}

// Stats is a snapshot of the pipeline's counters and queues (engine.Stats is this type).
type Stats struct {
	// Written, Durable and Dispatched are the pipeline's watermarks.
	Written, Durable, Dispatched int64
	// DispatchLag is Written - Dispatched: bytes appended but not yet in the ConsumeQueues and
	// IndexFiles. FlushLag is Written - Durable.
	DispatchLag, FlushLag int64
	// Sealed is the durable offset of the last checkpoint written: recovery refuses to start on
	// damage below it rather than cut it as a torn tail.
	Sealed int64
	// Queue depths (batches) and their bounds: the writer's inbox and the ack queue.
	AppendInbox, AppendInboxCap int
	AckQueue, AckQueueCap       int
	// What the writer stored: records, bytes, batches, duplicates answered from the dedupe
	// window (not stored again), records refused (disk full), and the ids in the window.
	Records, Bytes, Batches, Duplicates, AppendErrors int64
	DedupeSize                                        int
	// DedupeEvicted counts the ids dropped from the dedupe window's memory before their window
	// ended; DedupeLookups the lookups in the store the writer made for such ids, DedupeFound
	// the duplicates they found (ingress's own are in Ingress.StoreLookups).
	DedupeEvicted, DedupeLookups, DedupeFound int64
	// Syncs of the CommitLog so far, and syncs per stored record.
	Syncs          int64
	SyncsPerRecord float64
	// Disk and retention: DiskUsedRatio is the store file system's used fraction at the last
	// check, rounded up to whole percent as RocketMQ does (-1: unknown); RefusingWrites is set
	// while it is above DiskWarningRatio (writes fail with a *DiskFullError, Ready is not nil),
	// and while dispatch waits for space to grow a ConsumeQueue or the index (writes fail with
	// ENOSPC).
	// MinOffset is the CommitLog's first offset. SegmentsDeleted and BytesDeleted count the
	// CommitLog segments retention deleted, ConsumeQueueFilesDeleted and IndexFilesDeleted the
	// derived files that went with them.
	DiskUsedRatio                               float64
	RefusingWrites                              bool
	MinOffset                                   int64
	SegmentsDeleted, BytesDeleted               int64
	ConsumeQueueFilesDeleted, IndexFilesDeleted int64
	// ReadCRCFailures counts the reads refused because a record failed its CRC check (the
	// record is damaged on disk; engine verify reports it).
	ReadCRCFailures int64
	// Ingress is set for a served engine: messages received, excluded, rejected, dropped by the
	// NATS client (slow consumer), acks and error replies sent, worker queue depths.
	Ingress *ingress.Stats
}

// FileCounts are the store's files now (engine.FileCounts is this type).
type FileCounts struct {
	// Segments are the CommitLog's segment files, ConsumeQueues its (topic, queue) queues and
	// ConsumeQueuesMapped those mapped now, IndexFiles the IndexFiles.
	Segments            int `json:"commitlog_segments"`
	ConsumeQueues       int `json:"consumequeues"`
	ConsumeQueuesMapped int `json:"consumequeues_mapped"`
	IndexFiles          int `json:"index_files"`
}
