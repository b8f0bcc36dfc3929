package replay

import (
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// TestHeadersLeaveOutSubjectTags: TAGS that is the record's subject (the subject-tag rule) is not
// rebuilt as the tags header, wherever NATS_SUBJECT stands among the properties (ingress writes
// it first, a library Put after TAGS); other TAGS is, and the publisher's own tags header, kept
// under its name, comes back as it was sent.
func TestHeadersLeaveOutSubjectTags(t *testing.T) {
	props := func(kv ...string) []byte {
		var b []byte
		for i := 0; i+1 < len(kv); i += 2 {
			b = commitlog.AppendProperty(b, kv[i], kv[i+1])
		}
		return b
	}
	const subj = ingress.PropNatsSubject
	for _, c := range []struct {
		name  string
		props []byte
		want  []string
	}{
		{"ingress order, the rule", props(subj, "device.7.temp", "TAGS", "device.7.temp", "Rmq-Tags", "hot"), []string{"hot"}},
		{"Put order, the rule", props("TAGS", "device.7.temp", subj, "device.7.temp"), nil},
		{"other TAGS", props(subj, "orders.eu", "TAGS", "paid"), []string{"paid"}},
		{"Put order, other TAGS", props("TAGS", "paid", subj, "orders.eu"), []string{"paid"}},
		{"no subject", props("TAGS", "paid"), []string{"paid"}},
	} {
		m := reader.Message{RawProperties: c.props}
		h := Headers(&m, ingress.DefaultKeysHeader, ingress.DefaultTagsHeader)
		if got := h.Values(ingress.DefaultTagsHeader); !slices.Equal(got, c.want) {
			t.Errorf("%s: %s %q, want %q", c.name, ingress.DefaultTagsHeader, got, c.want)
		}
	}
}
