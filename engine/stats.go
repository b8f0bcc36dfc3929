package engine

import (
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/monitor"
)

// Stats is a snapshot of the pipeline's counters and queues; FileCounts are the store's files
// now. Both are the monitor's types (engine/monitor declares what it reads).
type (
	Stats      = monitor.Stats
	FileCounts = monitor.FileCounts
)

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	a := e.appender.Stats()
	o := e.Offsets()
	st := Stats{
		Written: o.Written, Durable: o.Durable, Dispatched: o.Dispatched,
		Sealed:          e.sealed.Load(),
		AppendInbox:     len(e.in),
		AppendInboxCap:  cap(e.in),
		AckQueue:        len(e.acks),
		AckQueueCap:     cap(e.acks),
		Records:         a.Records,
		Bytes:           a.Bytes,
		Batches:         a.Batches,
		Duplicates:      a.Duplicates,
		AppendErrors:    a.Errors,
		DedupeSize:      a.DedupeSize,
		DedupeEvicted:   a.DedupeEvicted,
		DedupeLookups:   a.DedupeLookups,
		DedupeFound:     a.DedupeFound,
		Syncs:           e.flusher.Syncs(),
		ReadCRCFailures: e.reader.CRCFailures(),
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

// FileCounts returns the number of the store's files of each kind (ErrClosed once closed).
func (e *Engine) FileCounts() (FileCounts, error) {
	release, err := e.readStart()
	if err != nil {
		return FileCounts{}, err
	}
	defer release()
	f := FileCounts{
		Segments:            len(e.log.Queue().Files()),
		ConsumeQueues:       e.cq.Len(),
		ConsumeQueuesMapped: e.cq.MappedQueues(),
	}
	if e.index != nil {
		f.IndexFiles = e.index.Len()
	}
	return f, nil
}

// SyncMetrics are the CommitLog sync histograms the flusher feeds.
func (e *Engine) SyncMetrics() *monitor.SyncMetrics { return e.syncMetrics }

// Store is the store the engine runs on, as the monitor shows it.
func (e *Engine) Store() monitor.Store {
	o := e.opts
	return monitor.Store{Dir: o.Dir, FS: o.FS, FlushMode: o.FlushMode.String(), SlowSync: o.SlowSync, SegmentSize: o.CommitLogFileSize}
}

// NATSConn is the engine's NATS connection.
func (s *Server) NATSConn() *nats.Conn { return s.conn }

// NATSInfo is the configuration of the NATS side, as the monitor shows it.
func (s *Server) NATSInfo() monitor.NATSInfo {
	n := monitor.NATSInfo{Embedded: s.nats != nil, Subjects: s.subjects(), QueueGroup: s.opts.QueueGroup}
	if s.nats != nil {
		n.Clients = s.nats.NumClients()
	}
	if s.opts.JetStream != nil {
		n.JetStreamStream = s.opts.JetStream.Stream
	}
	if s.opts.Ownership != nil {
		n.OwnershipEngineID = s.opts.Ownership.EngineID
	}
	return n
}
