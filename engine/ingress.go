package engine

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/lookup"
	"github.com/rocketstore/engine/engine/readapi"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// newIngress makes the ingress stage of a served engine on nc, sending into the writer's inbox:
// nopts' subjects and bounds, the engine's encoding, the read API's subjects excluded, and the
// store's lookups (engine/lookup) for batched acks (off with JetStream or a queue group: see
// NATSOptions), the dedupe window across a restart, and replicated mode. parts is the
// partitioned-ingest configuration in force (claimOwnership); interest is the embedded server's
// count of the subscriptions a subject reaches (nil with an external server: ingress.Config).
func (e *Engine) newIngress(nc *nats.Conn, nopts NATSOptions, parts *route.Partitions, interest func(string) int) (*ingress.Ingress, error) {
	o := e.opts
	// Before the first record of the serve, while the ConsumeQueues know every topic stored.
	wide := route.WideTopics(nopts.Topics)
	if nopts.NoSubjectTags {
		wide = nil
	}
	tags, err := subjecttags.Adopt(o.FS, o.Dir, e.reader.SubjectTags(), wide, e.cq.Topics(), o.Logger)
	switch {
	case vfs.IsNoSpace(err):
		o.Logger.Error().Err(err).Msg("no disk space to save the subject-tag rule of the new topics: " +
			"it applies from now on, and is saved as soon as space is freed")
		e.unsavedTags.Store(tags)
		e.group.Go("subject-tags", e.saveTagsLater)
	case err != nil:
		return nil, err
	}
	e.reader.SetSubjectTags(tags)
	f := lookup.Finder{Store: e, Indexed: e.index != nil, Written: e.written.Load, Logger: o.Logger}
	cfg := ingress.Config{
		Conn: nc, Out: e.in, Subjects: nopts.Subjects, QueueGroup: nopts.QueueGroup,
		QueuesPerTopic: nopts.QueuesPerTopic,
		Mapping:        route.Mapping{TopicTokens: nopts.TopicTokens, Patterns: nopts.Topics, MaxTopics: nopts.MaxTopics, KnownTopics: e.cq.Topics(), SubjectTags: tags},
		KeysHeader:     nopts.KeysHeader, TagsHeader: nopts.TagsHeader, QueueKeyHeader: nopts.QueueKeyHeader,
		Workers: nopts.Workers, WorkerQueue: nopts.WorkerQueue, MaxBatch: nopts.MaxBatch, DrainTimeout: nopts.DrainTimeout,
		Encode:    &commitlog.EncodeOptions{PropCRC: !o.NoPropCRC, MaxBodySize: o.MaxBodySize},
		StoreHost: o.StoreHost, PendingMsgs: nopts.PendingMsgs, PendingBytes: nopts.PendingBytes,
		NoReply: nopts.NoReply, Logger: o.Logger, Clock: o.Now, // ingress adds its stage field
		Partitions:  parts,
		StoreDedupe: f.StoreDedupe(e.index.LastEndTimestamp(), o.DedupeWindow, o.DedupeMax, o.Now, e.forgotten()),
		Interest:    interest,
	}
	if !nopts.NoReadAPI {
		cfg.Exclude = readapi.Excluded(nopts.APIPrefix)
	}
	if nopts.JetStream != nil {
		cfg.JetStream = f.JetStream(*nopts.JetStream)
	}
	if !nopts.NoBatchedAcks && nopts.JetStream == nil && nopts.QueueGroup == "" {
		cfg.Batched = f.Batched(nopts.MaxStreams, nopts.StreamIdle)
	}
	if nopts.Replicated != nil {
		cfg.Replicated = f.Replicated(*nopts.Replicated, o.StoreHost.String(), func(err error) {
			e.group.Cancel(fmt.Errorf("replicated mode: %w", err))
		})
	}
	return ingress.New(cfg)
}

// forgotten is the appender's report of the ids it dropped from memory within their window, for
// ingress to look up (nil when it does not drop any it expects to be looked up).
func (e *Engine) forgotten() func() (checked, until int64) {
	if e.index == nil || e.opts.forgetPastDedupeMax {
		return nil
	}
	return e.appender.Forgotten
}
