package engine

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestPutUnderSubjectTags: a library Put into a declared topic under the subject-tag rule stores
// the message's subject as TAGS, and refuses TAGS that is not the subject (it would make a read
// of that subject skip the message), failing that message alone.
func TestPutUnderSubjectTags(t *testing.T) {
	srv, err := Serve(Options{Dir: filepath.Join(t.TempDir(), "store"), Logger: zerolog.Nop()},
		NATSOptions{Listen: "127.0.0.1:-1", Topics: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	e := srv.Engine
	subject := map[string]string{natssubject.Property: "device.7.temp"}
	res, err := e.Put(t.Context(),
		Message{Topic: "device", Body: []byte("a"), Properties: subject},
		Message{Topic: "device", Body: []byte("b"), Properties: subject, Tags: "hot"},
		Message{Topic: "device", Body: []byte("c"), Properties: subject, Tags: "device.7.temp"},
		Message{Topic: "other", Body: []byte("d"), Properties: subject, Tags: "hot"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, subjecttags.ErrTagsNotSubject, nil, nil} {
		if !errors.Is(res[i].Err, want) || want == nil && res[i].Err != nil {
			t.Fatalf("message %d: %v, want %v", i, res[i].Err, want)
		}
	}
	if err := e.WaitDispatched(t.Context(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	got, err := e.Get(t.Context(), GetRequest{Topic: "device", QueueID: 0, Subject: "device.7.temp"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 2 || got.Messages[0].Tags != "device.7.temp" || got.Messages[1].Tags != "device.7.temp" {
		t.Fatalf("read back %d messages %+v; want a and c, TAGS the subject", len(got.Messages), got.Messages)
	}
	if other, err := e.Get(t.Context(), GetRequest{Topic: "other", QueueID: 0}); err != nil || len(other.Messages) != 1 ||
		other.Messages[0].Tags != "hot" {
		t.Fatalf("a topic outside the rule: %+v, %v; want TAGS hot", other.Messages, err)
	}
}
