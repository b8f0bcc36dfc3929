package wire

import (
	"strings"
	"testing"
)

func TestParseSeqHeader(t *testing.T) {
	good := []struct {
		in   string
		want SeqHeader
	}{
		{"abc 1 0", SeqHeader{Stream: "abc", Seq: 1}},
		{"A-z_9 42 41 r", SeqHeader{Stream: "A-z_9", Seq: 42, Acked: 41, Resend: true}},
		{strings.Repeat("s", 64) + " 9223372036854775807 5", SeqHeader{Stream: strings.Repeat("s", 64), Seq: 1<<63 - 1, Acked: 5}},
	}
	for _, c := range good {
		got, err := ParseSeqHeader([]string{c.in})
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"", "abc", "abc 1", "abc 0 0", "abc 1 1", "abc 2 3", "abc 1 0 x", "abc 1 0 r r", "a.b 1 0",
		strings.Repeat("s", 65) + " 1 0", "abc +1 0", "abc 1 -0", "abc 9223372036854775808 0", "abc  1 0",
	} {
		if _, err := ParseSeqHeader([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseSeqHeader([]string{"a 1 0", "a 2 0"}); err == nil {
		t.Error("two values accepted")
	}
}

// FuzzParseSeqHeader: a value either fails with a *ProtocolError (a 400) or parses to a valid
// header that AppendSeqHeader writes back as a value that parses to the same header.
func FuzzParseSeqHeader(f *testing.F) {
	for _, s := range []string{"abc 1 0", "A-z_9 42 41 r", "abc 1 0 x", "abc +1 0", "a.b 1 0", "s 9223372036854775807 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h, err := ParseSeqHeader([]string{v})
		if err != nil {
			if pe, ok := err.(*ProtocolError); !ok || pe.ReplyCode() != CodeInvalid {
				t.Fatalf("error %v is not a protocol error (400)", err)
			}
			return
		}
		if h.Seq == 0 || h.Seq > MaxSeq || h.Acked >= h.Seq || !ValidStreamID(h.Stream) {
			t.Fatalf("%q parsed to %+v", v, h)
		}
		back := string(AppendSeqHeader(nil, h.Stream, h.Seq, h.Acked, h.Resend))
		if again, err := ParseSeqHeader([]string{back}); err != nil || again != h {
			t.Fatalf("%q parsed to %+v, written back as %q, which parses to %+v, %v", v, h, back, again, err)
		}
	})
}

func TestDerivedMsgID(t *testing.T) {
	if id := DerivedMsgID("k3Jx9", 1001); id != "k3Jx9:1001" {
		t.Fatalf("DerivedMsgID = %q", id)
	}
}
