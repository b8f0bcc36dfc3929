package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
)

func TestParseTopicPattern(t *testing.T) {
	for _, tc := range []struct{ in, subjects, topic string }{
		{"orders.>", "orders.>", "orders"},
		{"device.*.temp", "device.*.temp", "device"},
		{"a.b.*.c.>", "a.b.*.c.>", "a_b"},
		{"orders", "orders", "orders"},
		{"*.temp=temps", "*.temp", "temps"},
		{"device.*.temp=device_temp", "device.*.temp", "device_temp"},
		{"a=b.>=a_b", "a=b.>", "a_b"}, // the last '=' separates: a subject may hold one
		{"h\xc3\xa9.>", "h\xc3\xa9.>", "h%C3%A9"},
		{"_INBOX=inbox", "_INBOX", "inbox"}, // the subject _INBOX itself is stored
		{"*.x=x", "*.x", "x"},
	} {
		p, err := ParseTopicPattern(tc.in)
		if err != nil || p.Subjects != tc.subjects || p.Topic != tc.topic {
			t.Errorf("ParseTopicPattern(%q) = %+v, %v; want {%s %s}", tc.in, p, err, tc.subjects, tc.topic)
		}
	}
	for _, in := range []string{"", ">", "*.x", "a..b", "a.>.b", "a b.>", "a.>=", "a.>=bad topic", "a.>=x/y",
		"a.>=" + strings.Repeat("t", 128), strings.Repeat("s", 128) + ".>",
		// Never stored: nothing could arrive in the topic.
		"_INBOX.>", "_INBOX.*.x=x", "$SYS.>=sys", "$RS.API.*=api", "$x"} {
		if p, err := ParseTopicPattern(in); err == nil {
			t.Errorf("ParseTopicPattern(%q) = %+v, want an error", in, p)
		}
	}
}

func TestCheckTopicPatterns(t *testing.T) {
	ok := []TopicPattern{{"orders.>", "orders"}, {"device.*.temp", "device"}, {"device.*.humidity", "device"}}
	if err := CheckTopicPatterns(ok); err != nil {
		t.Fatalf("disjoint patterns refused: %v", err)
	}
	for _, ps := range [][]TopicPattern{
		{{"orders.>", "orders"}, {"orders.eu", "eu"}},
		{{"device.*.temp", "d"}, {"device.7.*", "e"}},
		{{"a.*", "a"}, {"*.b", "b"}},
		{{"x", "bad topic"}},
		{{"x..y", "x"}},
		{{"_INBOX.>", "inbox"}},
		{{"$SYS.>", "sys"}},
	} {
		if err := CheckTopicPatterns(ps); err == nil {
			t.Errorf("CheckTopicPatterns(%v) accepted", ps)
		}
	}
}

// TestDeclaredTopics: a subject a pattern matches goes to its topic, whatever the rule and the
// limit, with no TAGS from the token rule; a long subject under a short topic is stored.
func TestDeclaredTopics(t *testing.T) {
	m := Mapping{TopicTokens: 1, MaxTopics: 1, Patterns: []TopicPattern{{"device.*.temp", "device"}, {"orders.>", "orders"}}}
	r := NewRouter(m, 4, "Rmq-Keys", 64, nil)
	long := "orders." + strings.Repeat("x", 300)
	for subject, topic := range map[string]string{"device.1.temp": "device", "device.2.temp": "device", "orders.eu": "orders", long: "orders"} {
		rt := r.Route(subject)
		if rt.Err != nil || rt.Topic != topic || rt.Tags != "" {
			t.Errorf("Route(%.20q) = %+v; want topic %s, no tags", subject, rt, topic)
		}
	}
	if rt := store(r, "device.1.hum"); rt.Topic != "device" || rt.Tags != "1.hum" {
		t.Errorf("the token rule's subject: %+v", rt)
	}
	if rt := store(r, "billing.x"); rt.Topic != OverflowTopic || rt.Tags != "x" {
		t.Errorf("past the limit of 1: %+v", rt)
	}
	if s := r.Stats(); s.RuleTopics != 1 || s.MaxTopics != 1 || s.Overflowed != 1 {
		t.Errorf("stats %+v", s)
	}
}

// store routes one message of subject as ingress does (Route, then Admit) and settles it as
// stored, and returns the route it took.
func store(r *Router, subject string) *Route {
	rt := r.Admit(r.Route(subject), 1)
	r.Settle(rt.Topic, 1, true)
	return rt
}

// TestTopicLimit: the rule makes at most MaxTopics topics; later subjects go to OverflowTopic,
// the first one reported once; a subject that has its topic keeps it, also after its route left
// the cache; the store's topics count and keep theirs (the limit across a restart), the declared
// and the overflow topic do not count; -1 is no limit.
func TestTopicLimit(t *testing.T) {
	var first []string
	r := NewRouter(Mapping{MaxTopics: 3}, 4, "Rmq-Keys", 2, nil) // a cache of 2 evicts
	r.OnFirstOverflow(func(s string, max int) { first = append(first, fmt.Sprint(s, " ", max)) })
	for i := range 10 {
		s := fmt.Sprintf("s.%d", i)
		rt := store(r, s)
		want := fmt.Sprintf("s_%d", i)
		if i >= 3 {
			want = OverflowTopic
		}
		if rt.Err != nil || rt.Topic != want {
			t.Fatalf("subject %d: %+v, want topic %s", i, rt, want)
		}
	}
	if rt := store(r, "s.0"); rt.Topic != "s_0" {
		t.Errorf("s.0 after eviction: topic %s", rt.Topic)
	}
	if len(first) != 1 || first[0] != "s.3 3" {
		t.Errorf("first overflow reported %q, want once, s.3", first)
	}
	if s := r.Stats(); s.RuleTopics != 3 || s.Overflowed != 7 {
		t.Errorf("stats %+v, want 3 topics, 7 overflowed routes", s)
	}

	known := Mapping{MaxTopics: 2, Patterns: []TopicPattern{{"d.>", "d"}},
		KnownTopics: []string{"a", "b", "c", "d", OverflowTopic}}
	r = NewRouter(known, 4, "Rmq-Keys", 64, nil)
	for subject, topic := range map[string]string{"a": "a", "c": "c", "e": OverflowTopic, "d.1": "d"} {
		if rt := store(r, subject); rt.Topic != topic {
			t.Errorf("known topics: %s -> %s, want %s", subject, rt.Topic, topic)
		}
	}
	if s := r.Stats(); s.RuleTopics != 3 {
		t.Errorf("known topics counted %d, want 3 (a, b, c)", s.RuleTopics)
	}

	r = NewRouter(Mapping{MaxTopics: -1}, 4, "Rmq-Keys", 64, nil)
	for i := range 2 * DefaultMaxTopics {
		if rt := store(r, fmt.Sprintf("u.%d", i)); rt.Topic == OverflowTopic {
			t.Fatalf("no limit: subject %d overflowed", i)
		}
	}
	r = NewRouter(Mapping{}, 4, "Rmq-Keys", 64, nil)
	for i := range DefaultMaxTopics + 1 {
		if rt := store(r, fmt.Sprintf("u.%d", i)); (rt.Topic == OverflowTopic) != (i == DefaultMaxTopics) {
			t.Fatalf("the default limit: subject %d in topic %s", i, rt.Topic)
		}
	}
}

func TestMappingCheck(t *testing.T) {
	for _, m := range []Mapping{{TopicTokens: -1}, {MaxTopics: -2}, {Patterns: []TopicPattern{{"a.>", "a"}, {"a.b", "b"}}}} {
		if err := m.Check(); err == nil {
			t.Errorf("%+v accepted", m)
		}
	}
	if err := (Mapping{MaxTopics: -1, Patterns: []TopicPattern{{"a.>", "a"}}}).Check(); err != nil {
		t.Error(err)
	}
}

// TestSubjectTagRoutes: a topic under the subject-tag rule takes the whole subject as TAGS,
// whether a pattern or the rule chose it; a declared topic outside it takes none.
func TestSubjectTagRoutes(t *testing.T) {
	set, err := subjecttags.Adopt(vfs.NewMem(), "/store", nil, []string{"device", "billing"}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m := Mapping{TopicTokens: 1, SubjectTags: set, Patterns: []TopicPattern{{"device.*.temp", "device"}, {"orders.>", "orders"}}}
	if got := WideTopics(append(m.Patterns, TopicPattern{"device.*.hum", "device"})); fmt.Sprint(got) != "[_overflow device orders]" {
		t.Errorf("WideTopics = %q", got)
	}
	r := NewRouter(m, 4, "Rmq-Keys", 64, nil)
	for _, c := range []struct {
		subject, topic, tags string
		rule                 bool
	}{
		{"device.7.temp", "device", "device.7.temp", true},
		{"orders.eu", "orders", "", false},
		{"billing.eu.paid", "billing", "billing.eu.paid", true}, // the token rule's topic, under the rule
		{"device.7.hum", "device", "device.7.hum", true},        // the token rule's too
		{"audit.x", "audit", "x", false},
	} {
		rt := r.Route(c.subject)
		if rt.Err != nil || rt.Topic != c.topic || rt.Tags != c.tags || rt.SubjectTags != c.rule {
			t.Errorf("Route(%q) = topic %q tags %q rule %v, %v; want %q %q %v", c.subject, rt.Topic, rt.Tags,
				rt.SubjectTags, rt.Err, c.topic, c.tags, c.rule)
		}
	}
}
