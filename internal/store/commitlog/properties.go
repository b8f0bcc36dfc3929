package commitlog

import (
	"bytes"
	"fmt"
	"iter"
	"unicode/utf8"
)

// Separators of the properties string (MessageDecoder).
const (
	NameValueSeparator = 0x01 // between a name and its value
	PropertySeparator  = 0x02 // after every entry, the last one included
	KeySeparator       = ' '  // between the keys of the KEYS property
)

// Well-known property names (MessageConst). Only the ones the store reads or writes are here.
const (
	PropKeys                  = "KEYS"                     // space-separated keys, each indexed as topic#key
	PropTags                  = "TAGS"                     // its Java hashCode is the consume queue tags code
	PropUniqKey               = "UNIQ_KEY"                 // client message id, indexed as topic#uniqKey
	PropWait                  = "WAIT"                     // "false": do not wait for the sync flush
	PropDelay                 = "DELAY"                    // delay level
	PropCluster               = "CLUSTER"                  // broker cluster name, added by the broker
	PropCRC32                 = "__CRC32#"                 // whole-record CRC, see EncodeOptions.PropCRC
	PropTranMsg               = "TRAN_MSG"                 // "true" on transactional half messages
	PropRealTopic             = "REAL_TOPIC"               // original topic of a delayed or half message
	PropRealQueueID           = "REAL_QID"                 // original queue id of a delayed or half message
	PropRetryTopic            = "RETRY_TOPIC"              // original topic of a retried message
	PropInnerNum              = "INNER_NUM"                // messages in an inner batch
	PropInnerBase             = "INNER_BASE"               // first queue offset of an inner batch
	PropInnerMultiDispatch    = "INNER_MULTI_DISPATCH"     // LMQ queues to dispatch to
	PropInnerMultiQueueOffset = "INNER_MULTI_QUEUE_OFFSET" // LMQ queue offsets
	PropDupInfo               = "DUP_INFO"                 // duplication mode bookkeeping
	// PropTransientPrefix starts names RocketMQ never stores.
	PropTransientPrefix = "__RMQ.TRANSIENT."
)

// Properties is an encoded properties string as stored in a record: `name 0x01 value 0x02`
// repeated. Its methods read it with RocketMQ's parse rule (MessageDecoder.string2messageProperties):
// split on 0x02; keep an item only if it has a 0x01 that is neither its first nor its last byte
// (so at least 3 bytes, a non-empty name and a non-empty value); the value is everything after the
// first 0x01. Items that break the rule are skipped, never an error.
type Properties []byte

// PropIter walks the entries of a Properties without allocating; the slices it returns alias the
// properties bytes.
type PropIter struct {
	rest []byte
}

// Iter returns an iterator positioned before the first entry.
func (p Properties) Iter() PropIter { return PropIter{rest: p} }

// Next returns the next well-formed entry; ok is false when there are no more.
func (it *PropIter) Next() (name, value []byte, ok bool) {
	for len(it.rest) > 0 {
		item := it.rest
		if i := bytes.IndexByte(item, PropertySeparator); i >= 0 {
			item, it.rest = item[:i], item[i+1:]
		} else {
			it.rest = nil
		}
		if k := bytes.IndexByte(item, NameValueSeparator); k > 0 && k < len(item)-1 {
			return item[:k], item[k+1:], true
		}
	}
	return nil, nil, false
}

// All yields every well-formed entry in stored order, duplicates included.
func (p Properties) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		it := p.Iter()
		for {
			n, v, ok := it.Next()
			if !ok || !yield(n, v) {
				return
			}
		}
	}
}

// Get returns the value of the named property without allocating. When a name repeats, the last
// entry wins, as it does when RocketMQ parses the string into a map.
func (p Properties) Get(name string) (value []byte, ok bool) {
	it := p.Iter()
	for {
		n, v, more := it.Next()
		if !more {
			return value, ok
		}
		if string(n) == name {
			value, ok = v, true
		}
	}
}

// Map parses the properties into a new map (the last entry of a repeated name wins).
func (p Properties) Map() map[string]string {
	m := make(map[string]string)
	it := p.Iter()
	for {
		n, v, ok := it.Next()
		if !ok {
			return m
		}
		m[string(n)] = string(v)
	}
}

// WellFormed says p is what the engine writes: nothing, or entries of a non-empty name, 0x01, a
// non-empty value and 0x02, the last entry's 0x02 included (CheckProperty keeps separators out of
// names and values). RocketMQ's messageProperties2String writes the same shape, but its parser
// takes anything, skipping what does not parse, so only where the engine alone wrote can the
// shape be required (PropCRCRule). A record torn inside its properties (cut off, then zeros)
// fails it: its last byte is not 0x02, or its last entry has no 0x01.
func (p Properties) WellFormed() bool { return p.wellFormedPrefix() == len(p) }

// wellFormedPrefix is the length of the longest prefix of p made of whole well-formed entries.
func (p Properties) wellFormedPrefix() int {
	n := 0
	for rest := p; len(rest) > 0; {
		end := bytes.IndexByte(rest, PropertySeparator)
		if end < 0 {
			return n
		}
		if k := bytes.IndexByte(rest[:end], NameValueSeparator); k < 1 || k >= end-1 {
			return n
		}
		n += end + 1
		rest = rest[end+1:]
	}
	return n
}

// AppendProperty appends one entry, `name 0x01 value 0x02`. It does not check the pair; see
// CheckProperty.
func AppendProperty(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, value...)
	return append(dst, PropertySeparator)
}

// CheckProperty reports whether a name/value pair survives a round trip through the properties
// string: both non-empty (RocketMQ's parser drops empty names and values), neither containing the
// 0x01 or 0x02 separators, both valid UTF-8 (Java decodes the string as UTF-8 and would replace
// invalid bytes). The error wraps ErrInvalidProperty and says which part is wrong and why.
func CheckProperty(name, value string) error {
	if err := checkPropertyPart("name", name); err != nil {
		return err
	}
	if err := checkPropertyPart("value", value); err != nil {
		return fmt.Errorf("%w (property %q)", err, name)
	}
	return nil
}

func checkPropertyPart(part, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty, and empty %ss are dropped when the properties are parsed",
			ErrInvalidProperty, part, part)
	}
	if i := indexSeparator(s); i >= 0 {
		return fmt.Errorf("%w: %s %q has separator byte %#02x at %d; 0x01 and 0x02 delimit properties",
			ErrInvalidProperty, part, s, s[i], i)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidProperty, part, s)
	}
	return nil
}

func indexSeparator(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == NameValueSeparator || s[i] == PropertySeparator {
			return i
		}
	}
	return -1
}

// KeyIter walks the keys of a KEYS value: tokens separated by single spaces, empty tokens skipped,
// as the index builder splits them. It does not allocate.
type KeyIter struct {
	rest []byte
}

// Keys returns an iterator over the keys of a KEYS property value.
func Keys(keys []byte) KeyIter { return KeyIter{rest: keys} }

// Next returns the next non-empty key; ok is false when there are no more.
func (it *KeyIter) Next() (key []byte, ok bool) {
	for len(it.rest) > 0 {
		tok := it.rest
		if i := bytes.IndexByte(tok, KeySeparator); i >= 0 {
			tok, it.rest = tok[:i], tok[i+1:]
		} else {
			it.rest = nil
		}
		if len(tok) > 0 {
			return tok, true
		}
	}
	return nil, false
}

// propCRCEntryPrefix is how the reserved __CRC32# entry starts.
const propCRCEntryPrefix = PropCRC32 + "\x01"

// appendWithoutPropCRC appends props with every __CRC32# entry removed, as RocketMQ's
// MessageUtils.deleteProperty does before it reserves a fresh one: an entry that starts at the
// beginning or right after a 0x02 with "__CRC32#" 0x01 is dropped up to and including its 0x02
// (or to the end when it has none).
func appendWithoutPropCRC(dst, props []byte) []byte {
	for len(props) > 0 {
		item := props
		i := bytes.IndexByte(props, PropertySeparator)
		if i >= 0 {
			item, props = props[:i+1], props[i+1:]
		} else {
			props = nil
		}
		if !bytes.HasPrefix(item, []byte(propCRCEntryPrefix)) {
			dst = append(dst, item...)
		}
	}
	return dst
}

// lenWithoutPropCRC is len(appendWithoutPropCRC(nil, props)) and whether the result ends in 0x02,
// computed without writing anything.
func lenWithoutPropCRC(props []byte) (n int, endsWithSep bool) {
	for len(props) > 0 {
		item := props
		i := bytes.IndexByte(props, PropertySeparator)
		if i >= 0 {
			item, props = props[:i+1], props[i+1:]
		} else {
			props = nil
		}
		if !bytes.HasPrefix(item, []byte(propCRCEntryPrefix)) {
			n += len(item)
			endsWithSep = item[len(item)-1] == PropertySeparator
		}
	}
	return n, endsWithSep
}
