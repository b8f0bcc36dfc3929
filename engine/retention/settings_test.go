package retention

import (
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestParseHours(t *testing.T) {
	h, err := parseHours("04; 16;;0")
	if err != nil || !h[4] || !h[16] || !h[0] || h[5] {
		t.Fatalf("%v %v", h, err)
	}
	for _, bad := range []string{"24", "4pm", "-1", "04,16"} {
		if _, err := parseHours(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestUsedPercent(t *testing.T) {
	for _, c := range []struct {
		u    vfs.Usage
		want int
	}{
		{vfs.Usage{Total: 100, Free: 100, Avail: 100}, 0},
		{vfs.Usage{Total: 100, Free: 10, Avail: 10}, 90},
		{vfs.Usage{Total: 1000, Free: 99, Avail: 99}, 91},   // 90.1% rounds up
		{vfs.Usage{Total: 100, Free: 10, Avail: 5}, 95},     // reserved blocks count as used: 90/95
		{vfs.Usage{Total: 1 << 62, Free: 0, Avail: 0}, 100}, // no overflow
		{vfs.Usage{}, 0},
	} {
		if got := usedPercent(c.u); got != c.want {
			t.Fatalf("%+v: %d%%, want %d%%", c.u, got, c.want)
		}
	}
}
