package reader

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
)

// Every record a read serves (Get, Lookup, Query, and so every read path built on them: the read
// API's get, pull and msg, replays, the Go consumer, the CLI online and offline) is checked
// against its CRC first, once, with the CRC the format already has (commitlog.View.CheckCRC: the
// whole-record __CRC32# where the record carries it, else BODYCRC). A record that fails is never
// served: the read answers ErrChecksum (which is also ErrCorrupt) saying which record, where,
// and where reading can go on past it, and CRCFailures counts it.
//
// Records skipped by a filter are not checked: nothing of them is served. The check runs on the
// record in the CommitLog's mapping just before it is copied, so the copy reads bytes the CRC
// has just brought into the cache.

// SetPropCRCRule sets where the records must carry the whole-record __CRC32# entry, so that a
// record whose entry was damaged in its own name is refused there rather than served on its
// body CRC alone (commitlog.PropCRCRule). Set it before reads start; the zero rule requires the
// entry nowhere (every record with one is still checked against it).
func (r *Reader) SetPropCRCRule(rule commitlog.PropCRCRule) { r.propCRC = rule }

// PropCRCRuleFrom is the rule of an engine writing the store from now on, whose records carry
// the entry from propCRCFrom (-1: none): every record from there on, also those written later.
func PropCRCRuleFrom(propCRCFrom int64) commitlog.PropCRCRule {
	if propCRCFrom < 0 {
		return commitlog.PropCRCRule{}
	}
	return commitlog.PropCRCRule{From: propCRCFrom, To: math.MaxInt64}
}

// loadPropCRCRule sets the rule of the store in dir from its checkpoint, for an offline Reader:
// the entry is required where the engine wrote it and synced it, up to the checkpoint's durable
// offset; none when there is no checkpoint or it does not decode (the reads then check each
// record's own CRC). Not past the durable offset, as recovery's rule is: the Reader keeps its
// rule across Refresh, and what a writer appends meanwhile (an engine run with --no-prop-crc, a
// RocketMQ broker) need not carry the entry; each such record is still checked against its own.
func (r *Reader) loadPropCRCRule(fsys vfs.FS, dir string) {
	if cp, err := checkpoint.Load(fsys, filepath.Join(dir, checkpoint.FileName)); err == nil {
		rule := cp.PropCRCRule()
		rule.To = min(rule.To, max(cp.Ext.DurableOffset, rule.From))
		r.propCRC = rule
	}
}

// CRCFailures is how many reads were refused because a record failed its CRC check.
func (r *Reader) CRCFailures() int64 { return r.crcFailures.Load() }

// checkCRC checks the record v at phys before it is served; what names it says which record it
// is in the error (a queue position, a message id).
func (r *Reader) checkCRC(v commitlog.View, phys int64, what func() string) error {
	if r.noCRC {
		return nil
	}
	err := v.CheckCRC(r.propCRC.Requires(phys))
	if err == nil {
		return nil
	}
	r.crcFailures.Add(1)
	return fmt.Errorf("%w: %w: %s, CommitLog offset %d, %d bytes: %w; it is not served (engine verify reports the damage)",
		ErrCorrupt, ErrChecksum, what(), phys, v.TotalSize(), err)
}
