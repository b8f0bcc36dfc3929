package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a size flag that takes plain bytes or a unit: 1GiB, 512MiB, 64KB, 4MB.
type byteSize int64

func (b *byteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	units := []struct {
		suffix string
		mult   int64
	}{
		{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad size %q: want bytes or a number with a unit (64MiB, 1GiB)", text)
	}
	if n > math.MaxInt64/mult {
		return fmt.Errorf("bad size %q: more than 2^63-1 bytes", text) // n*mult would wrap
	}
	*b = byteSize(n * mult)
	return nil
}
