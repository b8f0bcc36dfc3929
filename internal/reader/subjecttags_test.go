package reader

import (
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestGetSubjectSkipsByTagCode: in a topic under the subject-tag rule a literal subject filter
// passes over the units whose tag code is another subject's without reading their records, for
// the engine's Reader and for an offline one (which reads the rule from the store), and returns
// exactly the subject's messages, those without TAGS too. The proof that records are not read
// is a record that breaks the rule (TAGS "other", subject device.1.temp): read, it would match.
// Outside the rule, and for a wildcard filter, every candidate is read, and it is returned.
func TestGetSubjectSkipsByTagCode(t *testing.T) {
	fsys := vfs.NewMem()
	s := newTestStore(t, fsys, "/store", small)
	set, err := subjecttags.Adopt(fsys, "/store", nil, []string{"T"}, nil, zerolog.Nop())
	noErr(t, err)
	const wanted = "device.1.temp"
	for i := range 30 {
		subj := fmt.Sprintf("device.%d.temp", i%3)
		m := msg{body: body(i), tags: subj, props: [][2]string{{natssubject.Property, subj}}}
		switch i {
		case 9:
			m.tags = "" // no TAGS (a put without a subject's rule): code 0, read
			m.props = [][2]string{{natssubject.Property, wanted}}
		case 10:
			m.tags = "other" // breaks the rule: only a read finds its subject
		}
		s.put(m)
	}
	// device.1.temp: offsets 1, 4, 7, 9 (no TAGS), 10 (the broken one), 13, ... 28.
	read := func(r *Reader, subject string) []int64 {
		t.Helper()
		var offs []int64
		for next := int64(0); next < 30; {
			res := get(t, r, GetRequest{Topic: "T", Offset: next, Subject: subject, Max: 4})
			for _, m := range res.Messages {
				offs = append(offs, m.QueueOffset)
			}
			if res.NextOffset <= next {
				t.Fatalf("no progress at %d: %v", next, res.Status)
			}
			next = res.NextOffset
		}
		return offs
	}
	every := "[1 4 7 9 10 13 16 19 22 25 28]"
	if got := fmt.Sprint(read(s.r, wanted)); got != every {
		t.Fatalf("outside the rule: %s, want %s", got, every)
	}
	s.r.SetSubjectTags(set)
	skipped := "[1 4 7 9 13 16 19 22 25 28]"
	if got := fmt.Sprint(read(s.r, wanted)); got != skipped {
		t.Fatalf("under the rule: %s, want %s (offset 10's unit has another subject's code)", got, skipped)
	}
	if got := fmt.Sprint(read(s.r, "device.1.*")); got != every {
		t.Fatalf("a wildcard filter under the rule: %s, want %s", got, every)
	}

	off, err := OpenOffline(fsys, "/store", OfflineOptions{StoreHost: storeHost})
	noErr(t, err)
	defer off.Close()
	if !off.SubjectTags().Has("T") {
		t.Fatal("the offline reader did not load the rule from the store")
	}
	if got := fmt.Sprint(read(off, wanted)); got != skipped {
		t.Fatalf("offline, under the rule: %s, want %s", got, skipped)
	}
}
