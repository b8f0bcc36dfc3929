package route_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

func TestSubjectToTopic(t *testing.T) {
	for _, tc := range []struct{ subject, topic string }{
		{"orders", "orders"},
		{"orders.eu.paid", "orders_eu_paid"},
		{"a-b.C9", "a-b_C9"},
		{"under_score", "under%5Fscore"},
		{"pct%", "pct%25"},
		{"pipe|x", "pipe%7Cx"},
		{"star.*.gt.>", "star_%2A_gt_%3E"},
		{"héllo", "h%C3%A9llo"},
		{"\x00\xff", "%00%FF"},
		{"..", "__"},
	} {
		got, err := route.SubjectToTopic(tc.subject)
		if err != nil || got != tc.topic {
			t.Errorf("route.SubjectToTopic(%q) = %q, %v; want %q", tc.subject, got, err, tc.topic)
			continue
		}
		if err := commitlog.ValidateTopic(got); err != nil {
			t.Errorf("topic %q of %q is not a valid topic: %v", got, tc.subject, err)
		}
		if route.TopicLen(tc.subject) != len(got) {
			t.Errorf("route.TopicLen(%q) = %d, want %d", tc.subject, route.TopicLen(tc.subject), len(got))
		}
		back, err := route.TopicToSubject(got)
		if err != nil || back != tc.subject {
			t.Errorf("route.TopicToSubject(%q) = %q, %v; want %q", got, back, err, tc.subject)
		}
	}
}

func TestSubjectToTopicLimits(t *testing.T) {
	ok := strings.Repeat("a", commitlog.MaxTopicLen)
	if _, err := route.SubjectToTopic(ok); err != nil {
		t.Fatalf("127-byte topic refused: %v", err)
	}
	for _, s := range []string{"", ok + "b", strings.Repeat("_", 43), strings.Repeat("x", 1<<20)} {
		_, err := route.SubjectToTopic(s)
		if !errors.Is(err, route.ErrInvalidSubject) || ingress.ReplyCode(err) != wire.CodeInvalid {
			t.Errorf("SubjectToTopic(len %d) err = %v, want ErrInvalidSubject", len(s), err)
		}
		if s != "" && !strings.Contains(err.Error(), "token rule") {
			t.Errorf("error does not point to the fix: %v", err)
		}
	}
	// 42 underscores are 126 bytes: fits.
	if _, err := route.SubjectToTopic(strings.Repeat("_", 42)); err != nil {
		t.Fatal(err)
	}
}

func TestTopicToSubjectRejectsNonCanonical(t *testing.T) {
	for _, topic := range []string{
		"", "a|b", "%41", "%2E", "%2d", "%5f", "%5", "%", "%G0", "a.b", "a/b", "%RETRY%x",
	} {
		if s, err := route.TopicToSubject(topic); !errors.Is(err, route.ErrNotMappedTopic) {
			t.Errorf("TopicToSubject(%q) = %q, %v; want ErrNotMappedTopic", topic, s, err)
		}
	}
}

func TestTokenRule(t *testing.T) {
	for _, tc := range []struct {
		n                    int
		subject, topic, tags string
	}{
		{0, "orders.eu.paid", "orders_eu_paid", ""},
		{1, "orders.eu.paid", "orders", "eu.paid"},
		{2, "orders.eu.paid", "orders_eu", "paid"},
		{3, "orders.eu.paid", "orders_eu_paid", ""},
		{5, "orders.eu.paid", "orders_eu_paid", ""},
		{1, "orders", "orders", ""},
		{1, "my_app.x", "my%5Fapp", "x"},
	} {
		topic, tags, err := route.Mapping{TopicTokens: tc.n}.Map(tc.subject)
		if err != nil || topic != tc.topic || tags != tc.tags {
			t.Errorf("N=%d Map(%q) = %q, %q, %v; want %q, %q", tc.n, tc.subject, topic, tags, err, tc.topic, tc.tags)
		}
	}
	// The token rule is the way out for a long subject.
	long := "app." + strings.Repeat("x", 200)
	if _, _, err := (route.Mapping{}).Map(long); err == nil {
		t.Fatal("long subject accepted by the default rule")
	}
	topic, tags, err := route.Mapping{TopicTokens: 1}.Map(long)
	if err != nil || topic != "app" || tags != strings.Repeat("x", 200) {
		t.Fatalf("token rule: %q %q %v", topic, tags, err)
	}
}

// FuzzTopicMapping checks that the mapping is a bijection between subjects and the topics it
// makes: every subject it maps comes back from the topic, every topic it decodes comes back from
// the subject, and every topic it makes is a valid RocketMQ topic. The input is tried both as a
// subject and as a topic.
func FuzzTopicMapping(f *testing.F) {
	for _, s := range []string{"orders.eu", "a_b%c", "%5F", "h\xc3\xa9", "\x00.\xff", "x|y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if topic, err := route.SubjectToTopic(s); err == nil {
			if err := commitlog.ValidateTopic(topic); err != nil {
				t.Fatalf("subject %q -> invalid topic %q: %v", s, topic, err)
			}
			back, err := route.TopicToSubject(topic)
			if err != nil || back != s {
				t.Fatalf("subject %q -> %q -> %q, %v", s, topic, back, err)
			}
		} else if s != "" && route.TopicLen(s) <= commitlog.MaxTopicLen {
			t.Fatalf("subject %q refused: %v", s, err)
		}
		if subject, err := route.TopicToSubject(s); err == nil {
			topic, err := route.SubjectToTopic(subject)
			if err != nil || topic != s {
				t.Fatalf("topic %q -> %q -> %q, %v", s, subject, topic, err)
			}
		}
	})
}
