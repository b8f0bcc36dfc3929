package engine

import "github.com/rocketstore/engine/stages/ingress"

// Stats is a snapshot of the pipeline's counters and queues.
type Stats struct {
	Offsets
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
	// Ingress is set for a served engine: messages received, excluded, rejected, dropped by the
	// NATS client (slow consumer), acks and error replies sent, worker queue depths.
	Ingress *ingress.Stats
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	a := e.appender.Stats()
	st := Stats{
		Offsets:        e.Offsets(),
		Sealed:         e.sealed.Load(),
		AppendInbox:    len(e.in),
		AppendInboxCap: cap(e.in),
		AckQueue:       len(e.acks),
		AckQueueCap:    cap(e.acks),
		Records:        a.Records,
		Bytes:          a.Bytes,
		Batches:        a.Batches,
		Duplicates:     a.Duplicates,
		AppendErrors:   a.Errors,
		DedupeSize:     a.DedupeSize,
		Syncs:          e.flusher.Syncs(),
	}
	e.retentionStats(&st)
	st.DispatchLag = st.Written - st.Dispatched
	st.FlushLag = st.Written - st.Durable
	if st.Records > 0 {
		st.SyncsPerRecord = float64(st.Syncs) / float64(st.Records)
	}
	return st
}

// Stats returns the engine's counters with the ingress stage's.
func (s *Server) Stats() Stats {
	st := s.Engine.Stats()
	in := s.ing.Stats()
	st.Ingress = &in
	return st
}
