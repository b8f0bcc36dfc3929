package commitlog

import "math"

// PropCRCRule says what a record must carry, beyond what its own bytes prove, where it lies:
// the whole-record __CRC32# property, and well-formed properties. It is the one rule recovery,
// verify and repair apply, so that they never disagree about the same bytes.
//
// Everywhere, a record is valid on its structure and BODYCRC, and its __CRC32# entry, when it has
// one, must match (the Check defaults): that is what RocketMQ's recovery accepts (it writes no
// __CRC32# by default), plus the check of the entry where there is one. Where the engine wrote
// every record with the entry, in [From, To), the entry must be there: a record without it is
// one whose entry was damaged in its own name, or one torn before the entry (a record's first
// page on disk without its second), either of which would otherwise pass on its body CRC alone.
//
// Where only the engine has written, from OwnFrom on when Own (past its durable offset, while
// no RocketMQ broker has run on the store since: the checkpoint says so), every record's
// properties must also be well formed (Properties.WellFormed), as the engine writes them: a
// record torn inside its properties fails that even when the engine wrote it without the
// entry (NoPropCRC). Elsewhere RocketMQ's brokers may have written records of any properties,
// which RocketMQ's parser takes as they are, so they are not required there.
//
// The zero value requires nothing beyond the record's own bytes: a store RocketMQ wrote, or
// one it ran on after the engine.
type PropCRCRule struct {
	From, To int64
	Own      bool
	OwnFrom  int64
}

// NewPropCRCRule is the rule for a store the engine wrote last (no RocketMQ broker has run on it
// since): its records carry the entry from propCRCFrom on (-1: not every record does), to the
// end of the log, since past the durable offset only the engine wrote too and it writes the entry
// on every record; and past durable only the engine wrote, so properties must be well formed
// there.
func NewPropCRCRule(propCRCFrom, durable int64) PropCRCRule {
	r := PropCRCRule{Own: true, OwnFrom: max(durable, 0)}
	if propCRCFrom >= 0 {
		r.From, r.To = propCRCFrom, math.MaxInt64
	}
	return r
}

// Requires says the record at phys must carry the entry.
func (r PropCRCRule) Requires(phys int64) bool { return phys >= r.From && phys < r.To }

// RequiresWellFormed says the record at phys must have well-formed properties.
func (r PropCRCRule) RequiresWellFormed(phys int64) bool { return r.Own && phys >= r.OwnFrom }

// Empty says the rule requires the entry nowhere.
func (r PropCRCRule) Empty() bool { return r.To <= r.From }

// CheckPlaced checks what a record, valid in its own bytes (Scan or CheckRecord with the default
// Check passed it), must satisfy where it lies: PHYSICALOFFSET is its position phys, it carries
// the __CRC32# entry where rule requires it, and its properties are well formed where rule
// requires that. The error is a *CorruptError at off (ReasonPhysOffset, ReasonPropCRCMissing or
// ReasonPropsMalformed), or nil.
func CheckPlaced(off int, phys int64, v View, rule PropCRCRule) error {
	if got := v.PhysicalOffset(); got != phys {
		return &CorruptError{Off: off, Reason: ReasonPhysOffset, Got: got, Want: phys}
	}
	if rule.Requires(phys) && !v.HasPropCRC() {
		return &CorruptError{Off: off, Reason: ReasonPropCRCMissing}
	}
	if rule.RequiresWellFormed(phys) {
		if p := v.Properties(); !p.WellFormed() {
			return &CorruptError{Off: off, Reason: ReasonPropsMalformed, Got: int64(p.wellFormedPrefix()), Want: int64(len(p))}
		}
	}
	return nil
}

// Placed says a CheckPlaced error is about where the record lies rather than its own bytes: a
// scan ends there as at a torn record.
func Placed(r Reason) bool {
	return r == ReasonPhysOffset || r == ReasonPropCRCMissing || r == ReasonPropsMalformed
}
