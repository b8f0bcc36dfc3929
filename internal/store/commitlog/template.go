package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// RecordTemplate encodes records that differ from one record encoded by AppendRecord only in
// their body, their QUEUEID and one run of digits (decimal or uppercase hex) in their
// properties: the entries of a pack, whose properties differ only in the sequence number of
// their UNIQ_KEY, and the plain messages of one subject, whose properties differ only in the
// UNIQ_KEY generated for them. AppendRecord
// spends most of its time on what is the same for all of them (the checks, the lengths, the
// header fields, the properties); Append copies the parts and patches six fields. The bytes are
// AppendRecord's (TestRecordTemplateMatchesAppendRecord, FuzzRecordTemplate).
//
// The zero value holds no template; Reset makes one. A template holds copies, not references.
type RecordTemplate struct {
	head []byte // the record up to and including BODYLENGTH
	tail []byte // after the body: TOPICLENGTH, topic, PROPERTIESLENGTH, properties
	// digitsAt and digits place the varying digits in tail; propsLenAt is PROPERTIESLENGTH's
	// position in tail.
	digitsAt, digits, propsLenAt int
	maxBody                      int
}

// Reset makes t a template of rec, which AppendRecord encoded with opt from a message with
// properties props, where [digitsAt, digitsAt+digits) are the digits (0-9, A-F) that vary from
// record to record. The digits must be inside a property's value: changing them then changes no
// name, so AppendRecord would treat every record of the template alike. Reset refuses what it
// cannot make such a template of: a record it cannot read, digits that are not there or not in
// a value, and properties AppendRecord did not store as they were (a __CRC32# entry it dropped).
func (t *RecordTemplate) Reset(rec, props []byte, digitsAt, digits int, opt EncodeOptions) error {
	t.head, t.tail = t.head[:0], t.tail[:0]
	if len(rec) < MinRecordLen {
		return fmt.Errorf("%w: %d bytes", errNoTemplate, len(rec))
	}
	be := binary.BigEndian
	ver, ok := VersionOf(be.Uint32(rec[PosMagic:]))
	sysFlag := int32(be.Uint32(rec[PosSysFlag:]))
	headLen := fixedLen(sysFlag) + 4
	if !ok || headLen > len(rec) {
		return fmt.Errorf("%w: not a record", errNoTemplate)
	}
	bodyLen := int(be.Uint32(rec[headLen-4:]))
	if bodyLen < 0 || headLen+bodyLen > len(rec) {
		return fmt.Errorf("%w: body length %d", errNoTemplate, bodyLen)
	}
	tail := rec[headLen+bodyLen:]
	topicLen, tl := 0, ver.TopicLenSize()
	if len(tail) < tl {
		return fmt.Errorf("%w: no topic length", errNoTemplate)
	}
	if tl == 2 {
		topicLen = int(be.Uint16(tail))
	} else {
		topicLen = int(tail[0])
	}
	propsLenAt := tl + topicLen
	if propsLenAt+2 > len(tail) || propsLenAt+2+int(be.Uint16(tail[propsLenAt:])) != len(tail) {
		return fmt.Errorf("%w: properties length", errNoTemplate)
	}
	if n, _ := lenWithoutPropCRC(props); n != len(props) || !bytes.HasPrefix(tail[propsLenAt+2:], props) {
		return fmt.Errorf("%w: the properties are not stored as given", errNoTemplate)
	}
	if digitsAt < 0 || digits <= 0 || digitsAt+digits > len(props) {
		return fmt.Errorf("%w: digits [%d,%d) outside the properties", errNoTemplate, digitsAt, digitsAt+digits)
	}
	for _, c := range props[digitsAt : digitsAt+digits] {
		if !isDigitOrUpperHex(c) {
			return fmt.Errorf("%w: %q at the digits' place", errNoTemplate, props[digitsAt:digitsAt+digits])
		}
	}
	if i := bytes.LastIndexAny(props[:digitsAt], "\x01\x02"); i < 0 || props[i] != NameValueSeparator {
		return fmt.Errorf("%w: the digits are not in a property value", errNoTemplate)
	}
	at := propsLenAt + 2 + digitsAt
	t.head = append(t.head, rec[:headLen]...)
	t.tail = append(t.tail, tail...)
	t.digitsAt, t.digits, t.propsLenAt, t.maxBody = at, digits, propsLenAt, opt.maxBody()
	return nil
}

// isDigitOrUpperHex reports whether c may be one of a template's varying digits: none of them is
// a separator, so changing them changes no name.
func isDigitOrUpperHex(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'F'
}

// errNoTemplate: Reset was given something it cannot make a template of.
var errNoTemplate = errors.New("commitlog: no record template")

// SetBorn makes the records t encodes from now on carry born as their BORNTIMESTAMP, so that a
// template outlives the batch time it was made with.
func (t *RecordTemplate) SetBorn(born int64) {
	if t.Ok() {
		binary.BigEndian.PutUint64(t.head[PosBornTimestamp:], uint64(born))
	}
}

// Ok says whether t holds a template.
func (t *RecordTemplate) Ok() bool { return len(t.head) > 0 }

// Len is the length of the record Append makes with a body and digits of these lengths.
func (t *RecordTemplate) Len(bodyLen, digitsLen int) int {
	return len(t.head) + bodyLen + len(t.tail) - t.digits + digitsLen
}

// Append appends the record of the template with queueID, body and digits (digits that replace
// the template's, of the kinds Reset accepts) to dst and returns the extended slice. It checks the limits
// AppendRecord checks and returns the same errors, with dst unchanged. It allocates nothing when
// dst has room for the record.
func (t *RecordTemplate) Append(dst []byte, queueID int32, body, digits []byte) ([]byte, error) {
	if len(body) > t.maxBody {
		return dst, fmt.Errorf("%w: body is %d bytes, limit %d", ErrBodyTooLarge, len(body), t.maxBody)
	}
	propsLen := len(t.tail) - t.propsLenAt - 2 - t.digits + len(digits)
	if propsLen > MaxPropertiesLen {
		return dst, fmt.Errorf("%w: properties take %d bytes as stored, limit %d", ErrPropertiesTooLarge,
			propsLen, MaxPropertiesLen)
	}
	n := t.Len(len(body), len(digits))
	if int64(n) > int64(t.maxBody)+RecordOverhead || n > math.MaxInt32 {
		return dst, fmt.Errorf("%w: record is %d bytes, limit %d", ErrRecordTooLarge, n,
			min(int64(t.maxBody)+RecordOverhead, math.MaxInt32))
	}
	start := len(dst)
	dst = append(dst, t.head...)
	dst = append(dst, body...)
	tailAt := len(dst)
	dst = append(dst, t.tail[:t.digitsAt]...)
	dst = append(dst, digits...)
	dst = append(dst, t.tail[t.digitsAt+t.digits:]...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint32(b[PosTotalSize:], uint32(n))
	be.PutUint32(b[PosBodyCRC:], uint32(BodyCRC(body)))
	be.PutUint32(b[PosQueueID:], uint32(queueID))
	be.PutUint32(b[len(t.head)-4:], uint32(len(body)))
	be.PutUint16(dst[tailAt+t.propsLenAt:], uint16(propsLen))
	return dst, nil
}
