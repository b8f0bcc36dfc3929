// Package javahash computes Java's String.hashCode, which RocketMQ's on-disk formats depend on:
// the ConsumeQueue tag code and the IndexFile key hash.
package javahash

import (
	"unicode/utf8"
	"unsafe"
)

// String returns Java's String.hashCode of s: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code
// units with int32 wrap-around. s is taken as UTF-8; an invalid byte counts as U+FFFD, which is
// what Java's UTF-8 decoder yields for it.
func String(s string) int32 { return Continue(0, s) }

// Bytes is String for a byte slice, without converting it.
func Bytes(b []byte) int32 {
	if len(b) == 0 {
		return 0
	}
	return Continue(0, unsafe.String(&b[0], len(b)))
}

// Continue continues the hash h over s: hashCode is a left fold (h = 31*h + unit), so the hash
// of a concatenation a+b is Continue(String(a), b). The IndexFile hashes "topic#key" this way
// without building the string.
func Continue(h int32, s string) int32 {
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

// ContinueBytes is Continue over a byte slice, without converting it.
func ContinueBytes(h int32, b []byte) int32 {
	if len(b) == 0 {
		return h
	}
	return Continue(h, unsafe.String(&b[0], len(b)))
}

// TagsCode is the ConsumeQueue tag code of a TAGS value: its hashCode sign-extended, 0 if empty.
func TagsCode(tags string) int64 { return int64(String(tags)) }

// IndexKeyHash is the IndexFile key hash: abs(hashCode), with Integer.MIN_VALUE mapped to 0
// (Java's Math.abs leaves MIN_VALUE negative and the index then forces it to 0).
func IndexKeyHash(key string) int32 { return IndexHash(String(key)) }

// IndexHash turns a hashCode into the IndexFile's key hash (see IndexKeyHash).
func IndexHash(h int32) int32 {
	if h < 0 {
		if h == -1<<31 {
			return 0
		}
		return -h
	}
	return h
}
