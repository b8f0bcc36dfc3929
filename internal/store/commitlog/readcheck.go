package commitlog

// CheckCRC checks the CRC of a record a reader is about to serve, with one pass over its bytes:
// the whole-record __CRC32# entry when the record has one (it covers every byte before it, the
// body and its BODYCRC included, so a match means the record is the one its writer stamped),
// else BODYCRC. requireProp says the record must carry the entry (it lies where PropCRCRule
// requires it): a record without it there is one whose entry, or the bytes before it, were
// damaged, which would otherwise pass on its body CRC alone (a torn record's properties that end
// in zeros, say). The error is a *CorruptError (ReasonPropCRC, ReasonPropCRCMissing or
// ReasonBodyCRC) wrapping ErrCorrupt, or nil.
//
// Scan and CheckRecord check both CRCs, for recovery and verify, which must also tell a body
// damaged before its writer computed the entry; a read only needs to know that the bytes are
// the ones written, and one CRC over the record is what that costs.
func (v View) CheckCRC(requireProp bool) error {
	if v.HasPropCRC() {
		return verify(v, Check{NoBodyCRC: true})
	}
	if requireProp {
		return corrupt(ReasonPropCRCMissing, 0, 0)
	}
	return verify(v, Check{NoPropCRC: true})
}
