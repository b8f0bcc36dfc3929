package route_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestPartitionOfMatchesServer: route.PartitionOf and route.PartitionMapping give the partition nats-server's
// own subject transform gives, for keys of every shape, one and two key tokens.
func TestPartitionOfMatchesServer(t *testing.T) {
	for _, c := range []struct {
		source  string
		subject func(k string) string
		key     func(k string) string
	}{
		{"orders.*", func(k string) string { return "orders." + k }, func(k string) string { return k }},
		{"orders.*.>", func(k string) string { return "orders." + k + ".paid.eu" }, func(k string) string { return k }},
		{"a.*.b.*", func(k string) string { return "a." + k + ".b.x" + k }, func(k string) string { return k + "x" + k }},
	} {
		for _, count := range []int{1, 8, 64, 1000} {
			dest, err := route.PartitionMapping("rmq.p", count, c.source)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := server.NewSubjectTransform(c.source, dest)
			if err != nil {
				t.Fatalf("%s -> %s: %v", c.source, dest, err)
			}
			for i := range 300 {
				k := fmt.Sprintf("key-%d-%s", i, strings.Repeat("é", i%3))
				got, err := tr.Match(c.subject(k))
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("rmq.p.%d.%s", route.PartitionOf(c.key(k), count), c.subject(k))
				if got != want {
					t.Fatalf("%s (%s): server %q, ours %q", c.subject(k), dest, got, want)
				}
			}
		}
	}
}

func TestPartitionMappingErrors(t *testing.T) {
	for _, src := range []string{"orders", "orders.>", "*.x", ">", "rmq.p.x.*", "rmq.p", "a..*", ""} {
		if dest, err := route.PartitionMapping("rmq.p", 8, src); err == nil {
			t.Errorf("%q: %q accepted", src, dest)
		}
	}
	if _, err := (&route.Partitions{Count: 8}).Check(); err == nil {
		t.Error("no owned partition accepted")
	}
	for _, p := range []route.Partitions{{Count: 8, Owned: []int{8}}, {Count: -1, Owned: []int{0}}, {Count: route.MaxPartitions + 1, Owned: []int{0}},
		{Prefix: "$rmq", Owned: []int{0}}, {Prefix: "a.*", Owned: []int{0}}} {
		if _, err := p.Check(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

// TestPartitionRoutes: a partition subject routes to its partition's queue with the publisher's
// subject as NATS_SUBJECT and the rest of the mapping applied to it; a partition not owned is
// refused with 503, a subject not in the namespace's form with 400.
func TestPartitionRoutes(t *testing.T) {
	parts, err := (&route.Partitions{Count: 16, Owned: []int{3, 5, 3}}).Check()
	if err != nil {
		t.Fatal(err)
	}
	if got := parts.Subjects(); len(got) != 2 || got[0] != "rmq.p.3.>" || got[1] != "rmq.p.5.>" {
		t.Fatalf("subjects %v", got)
	}
	r := route.NewRouter(route.Mapping{TopicTokens: 1}, 16, ingress.DefaultKeysHeader, 64, parts)
	rt := r.Route("rmq.p.5.orders.alice.x")
	m := nats.NewMsg("rmq.p.5.orders.alice.x")
	m.Header.Set(ingress.DefaultKeysHeader, "other-key") // the partition decides, not the key
	if rt.Err != nil || rt.Topic != "orders" || rt.Tags != "alice.x" || rt.Stored != "orders.alice.x" || r.Queue(m, rt) != 5 {
		t.Fatalf("route %+v, queue %d", rt, r.Queue(m, rt))
	}
	for subject, code := range map[string]int{
		"rmq.p.05.orders.a": wire.CodeInvalid,
		"rmq.p.+5.orders.a": wire.CodeInvalid,
		"rmq.p.5":           wire.CodeInvalid,
		"rmq.p.5.":          wire.CodeInvalid,
		"rmq.p.99999.a":     wire.CodeInvalid,
		"rmq.q.5.orders.a":  wire.CodeInvalid,
		"rmq.p.5.orders..a": wire.CodeInvalid,
	} {
		rt := r.Route(subject)
		if rt.Err == nil || ingress.ReplyCode(rt.Err) != code {
			t.Errorf("%s: %v (code %d), want %d", subject, rt.Err, ingress.ReplyCode(rt.Err), code)
		}
	}
	// Ownership is checked per message (it moves), not cached in the route.
	if rt := r.Route("rmq.p.4.orders.a"); rt.Err != nil || rt.Partition != 4 || parts.Owns(4) || !parts.Owns(5) {
		t.Fatalf("route of a partition not owned: %+v", rt)
	}
	if got := parts.OwnedNow(); len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("owned now %v", got)
	}
}

func TestSplitPartitionSource(t *testing.T) {
	for _, c := range []struct {
		in   string
		subj string
		n    int
		ok   bool
	}{{"orders.*", "orders.*", 64, true}, {"orders.*=16", "orders.*", 16, true}, {"o.*=64", "o.*", 64, true},
		{"o.*=65", "", 0, false}, {"o.*=0", "", 0, false}, {"o.*=x", "", 0, false}} {
		subj, n, err := route.SplitPartitionSource(c.in, 64)
		if (err == nil) != c.ok || subj != c.subj || n != c.n {
			t.Errorf("%q: %q %d %v", c.in, subj, n, err)
		}
	}
}
