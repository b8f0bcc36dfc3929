package commitlog

// PropCRCRule says which records must carry the whole-record __CRC32# property. It is the one
// rule recovery, verify and repair apply, so that they never disagree about the same bytes.
//
// Everywhere, a record is valid on its structure and BODYCRC, and its __CRC32# entry, when it has
// one, must match (the Check defaults): that is what RocketMQ's recovery accepts (it writes no
// __CRC32# by default), plus the check of the entry where there is one. Only in [From, To) must the
// entry be there: the engine wrote every record of that range with it, so a record without it is
// one whose entry was damaged in its own name, which would otherwise pass for its absence. From is
// where the engine's records began to carry it; To is the engine's durable offset, the end of what
// it knows it wrote and synced. Past To lie the unsynced tail of the engine's last run and whatever
// another writer (RocketMQ's broker) appended after the engine stopped, which legitimately lacks
// the entry. The zero value (and any empty range) requires the entry nowhere.
type PropCRCRule struct {
	From, To int64
}

// NewPropCRCRule is the rule for a store whose records carry the entry from propCRCFrom on (-1:
// not known) and whose data is durable below durable.
func NewPropCRCRule(propCRCFrom, durable int64) PropCRCRule {
	if propCRCFrom < 0 || durable <= propCRCFrom {
		return PropCRCRule{}
	}
	return PropCRCRule{From: propCRCFrom, To: durable}
}

// Requires says the record at phys must carry the entry.
func (r PropCRCRule) Requires(phys int64) bool { return phys >= r.From && phys < r.To }

// Empty says the rule requires the entry nowhere.
func (r PropCRCRule) Empty() bool { return r.To <= r.From }

// CheckPlaced checks what a record, valid in its own bytes (Scan or CheckRecord with the default
// Check passed it), must satisfy where it lies: PHYSICALOFFSET is its position phys, and it
// carries the __CRC32# entry where rule requires it. The error is a *CorruptError at off
// (ReasonPhysOffset or ReasonPropCRCMissing), or nil.
func CheckPlaced(off int, phys int64, v View, rule PropCRCRule) error {
	if got := v.PhysicalOffset(); got != phys {
		return &CorruptError{Off: off, Reason: ReasonPhysOffset, Got: got, Want: phys}
	}
	if rule.Requires(phys) && !v.HasPropCRC() {
		return &CorruptError{Off: off, Reason: ReasonPropCRCMissing}
	}
	return nil
}
