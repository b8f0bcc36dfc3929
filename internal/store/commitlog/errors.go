package commitlog

import (
	"errors"
	"fmt"
)

// Errors the encoder and the validators return, always wrapped with the detail (fmt "%w"), so
// that callers can map them with errors.Is to a clear reply and nothing is stored.
var (
	// ErrBodyTooLarge: the body is longer than the configured maxMessageSize.
	ErrBodyTooLarge = errors.New("commitlog: message body too large")
	// ErrPropertiesTooLarge: the encoded properties, CRC reservation included, exceed 32767 bytes.
	ErrPropertiesTooLarge = errors.New("commitlog: message properties too large")
	// ErrRecordTooLarge: the whole record exceeds maxMessageSize + 64 KiB (or an int32 TOTALSIZE).
	ErrRecordTooLarge = errors.New("commitlog: record too large")
	// ErrInvalidTopic: the topic breaks a naming rule; see ValidateTopic.
	ErrInvalidTopic = errors.New("commitlog: invalid topic")
	// ErrInvalidProperty: a property name or value cannot be encoded; see CheckProperty.
	ErrInvalidProperty = errors.New("commitlog: invalid property")
	// ErrInvalidMsgID: a string is not an offset message id.
	ErrInvalidMsgID = errors.New("commitlog: invalid message id")
	// ErrCorrupt: bytes are not a valid record; the error is a *CorruptError saying why.
	ErrCorrupt = errors.New("commitlog: corrupt record")
	// ErrOutOfRange: a scan start position lies outside the segment.
	ErrOutOfRange = errors.New("commitlog: position out of range")
)

// Reason says why the scanner rejected bytes as a record.
type Reason uint8

// The reasons a record is torn or corrupt.
const (
	ReasonNone           Reason = iota
	ReasonTornZero              // TOTALSIZE 0 but non-zero bytes follow
	ReasonBadMagic              // MAGICCODE is neither V1, V2 nor BLANK
	ReasonSizeRange             // TOTALSIZE below the minimum or past the end of the segment
	ReasonBadBlank              // blank filler whose TOTALSIZE is not the bytes left in the segment
	ReasonBadLength             // a length field is negative or runs past TOTALSIZE
	ReasonSizeMismatch          // TOTALSIZE differs from the length recomputed from the fields
	ReasonBodyCRC               // BODYCRC does not match the body
	ReasonPropCRC               // the __CRC32# property does not match the record, or is malformed
	ReasonPropCRCMissing        // the __CRC32# property is required but absent
	ReasonPhysOffset            // PHYSICALOFFSET is not the record's position in the log
	ReasonPropsMalformed        // the properties are not well formed where only the engine wrote
)

var reasonText = [...]string{
	ReasonNone:           "no error",
	ReasonTornZero:       "zero TOTALSIZE followed by non-zero bytes",
	ReasonBadMagic:       "bad magic code",
	ReasonSizeRange:      "TOTALSIZE out of range",
	ReasonBadBlank:       "blank filler size is not the bytes left in the segment",
	ReasonBadLength:      "length field out of range",
	ReasonSizeMismatch:   "TOTALSIZE differs from the recomputed record length",
	ReasonBodyCRC:        "body CRC mismatch",
	ReasonPropCRC:        "whole-record CRC (__CRC32#) mismatch",
	ReasonPropCRCMissing: "whole-record CRC (__CRC32#) property missing",
	ReasonPhysOffset:     "PHYSICALOFFSET is not the record's position",
	ReasonPropsMalformed: "properties not well formed (torn inside them)",
}

// String returns a short description of r.
func (r Reason) String() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// CorruptError describes a torn or corrupt record: what is wrong and, depending on the reason, the
// stored value (Got) and what it should have been or the bound it broke (Want). A malformed
// __CRC32# entry has Got -1. Off is where the record starts: 0 from CheckRecord, Parse and Decode,
// the position in the segment from Scan.
type CorruptError struct {
	Off    int
	Reason Reason
	Got    int64
	Want   int64
}

// Error describes the corruption with the values involved.
func (e *CorruptError) Error() string {
	var detail string
	switch e.Reason {
	case ReasonTornZero:
		detail = fmt.Sprintf(" (first non-zero byte at +%d)", e.Got)
	case ReasonBadMagic:
		detail = fmt.Sprintf(" %#08x", uint32(e.Got))
	case ReasonSizeRange:
		detail = fmt.Sprintf(": %d, must be in [%d, %d]", e.Got, MinRecordLen, e.Want)
	case ReasonBadBlank:
		detail = fmt.Sprintf(": %d, %d bytes left", e.Got, e.Want)
	case ReasonBadLength:
		detail = fmt.Sprintf(": %d, at most %d fits", e.Got, e.Want)
	case ReasonSizeMismatch:
		detail = fmt.Sprintf(": TOTALSIZE %d, fields add up to %d", e.Got, e.Want)
	case ReasonBodyCRC, ReasonPropCRC:
		detail = fmt.Sprintf(": stored %d, computed %d", e.Got, e.Want)
	case ReasonPhysOffset:
		detail = fmt.Sprintf(": %d, at %d", e.Got, e.Want)
	case ReasonPropsMalformed:
		detail = fmt.Sprintf(" (from byte %d of %d)", e.Got, e.Want)
	}
	return fmt.Sprintf("commitlog: corrupt record at %d: %s%s", e.Off, e.Reason, detail)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(r Reason, got, want int64) error {
	return &CorruptError{Reason: r, Got: got, Want: want}
}
