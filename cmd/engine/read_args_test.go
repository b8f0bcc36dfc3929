package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

func TestParseTimeArg(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for in, want := range map[string]int64{
		"now":                           now.UnixMilli(),
		"-1h":                           now.Add(-time.Hour).UnixMilli(),
		"+90s":                          now.Add(90 * time.Second).UnixMilli(),
		"1767366245000":                 1767366245000,
		"2026-01-02T15:04:05Z":          time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC).UnixMilli(),
		"2026-01-02T15:04:05.250+01:00": time.Date(2026, 1, 2, 14, 4, 5, 250e6, time.UTC).UnixMilli(),
	} {
		if got, err := parseTimeArg(in, now); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "1h", "-1x", "2026-01-02", "12a"} {
		if _, err := parseTimeArg(in, now); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestPreviews(t *testing.T) {
	for body, want := range map[string]string{
		"":                         "(empty)",
		"hello\nworld":             "hello.world",
		strings.Repeat("x", 50):    strings.Repeat("x", 39) + "… (50 bytes)",
		"\x00\x01\xff":             "(binary, 3 bytes) 0001ff",
		strings.Repeat("é", 40):    strings.Repeat("é", 40),
		strings.Repeat("\xff", 30): "(binary, 30 bytes) " + strings.Repeat("ff", 20) + "…",
	} {
		if got := bodyPreview([]byte(body), bodyPreviewRunes); got != want {
			t.Errorf("bodyPreview(%q) = %q, want %q", body, got, want)
		}
	}
	if got := propsPreview(map[string]string{"b": "2", "TAGS": "t", "a": "1", commitlog.PropCRC32: "9"}); got != "a=1 b=2 TAGS=t" {
		t.Errorf("propsPreview: %q", got)
	}
}

// TestReadWrongPrefix: under a prefix no engine serves the API on, an engine storing every
// subject acks the request as a message to store; the commands must tell, not print an empty
// result.
func TestReadWrongPrefix(t *testing.T) {
	f := startReadEngine(t)
	src := append(f.natsArgs(), "--api-prefix", "X.API")
	for _, args := range [][]string{
		{"get", "--topic", "orders_eu", "--queue", "0"},
		{"msg", f.acks[0].MsgID},
		{"query", "--topic", "orders_eu", "--key", "common"},
		{"offsets", "--topic", "orders_eu"},
		{"topics"},
		{"replay", "--topic", "orders_eu", "--offset", "0", "--to", "elsewhere"},
	} {
		failRead(t, 1, `no engine serves the read API with the prefix "X.API" at `+f.url, with(src, args...)...)
	}
}
