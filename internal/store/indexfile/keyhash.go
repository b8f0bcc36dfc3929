package indexfile

import "unicode/utf8"

// KeyHash is the index hash of the key "topic#key": javahash.IndexKeyHash(topic + "#" + key),
// computed without building the string. String.hashCode is a left fold (h = 31*h + unit), so the
// hash of a concatenation is the fold continued over the second part. The '#' between the parts
// also keeps UTF-8 decoding from crossing the boundary: it is never a continuation byte, so an
// invalid sequence at the end of topic decodes to the same U+FFFD units alone or concatenated.
func KeyHash(topic, key string) int32 { return keyHashFrom(topicPrefixHash(topic), key) }

// topicPrefixHash is hashCode(topic + "#"), computed once per message.
func topicPrefixHash(topic string) int32 { return 31*hashContinue(0, topic) + '#' }

// keyHashFrom finishes the hash of prefix + key and applies IndexKeyHash's abs.
func keyHashFrom(prefix int32, key string) int32 {
	h := hashContinue(prefix, key)
	if h < 0 {
		if h == -1<<31 {
			return 0 // Math.abs(Integer.MIN_VALUE) stays negative; IndexFile forces it to 0
		}
		return -h
	}
	return h
}

// hashContinue continues Java's String.hashCode from h over s, exactly as javahash.String does
// from 0: UTF-16 code units, an invalid UTF-8 byte counting as U+FFFD.
func hashContinue(h int32, s string) int32 {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
