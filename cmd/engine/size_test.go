package main

import (
	"math"
	"testing"
)

// TestByteSizeAtTheLimit: sizes up to 2^63-1 bytes parse, with or without a unit; one that
// would wrap past it is refused (16777217TiB wrapped to 1TiB and was taken as that).
func TestByteSizeAtTheLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"9223372036854775807": math.MaxInt64, "8388607TiB": 8388607 << 40, "1GiB": 1 << 30, "64 KB": 64_000, "0": 0,
		"9223372036854775807B": math.MaxInt64,
	} {
		var b byteSize
		if err := b.UnmarshalText([]byte(in)); err != nil || int64(b) != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"16777217TiB", "8388608TiB", "9223372036854776KB", "9223372036854775808", "-1", "1.5GiB", "GiB"} {
		var b byteSize
		if err := b.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q accepted as %d", in, b)
		}
	}
}
