package ingress

import (
	"net/netip"
	"unsafe"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// recordIndex works out, while the properties are built, what dispatch needs of the record (its
// tag code and IndexFile hashes, derive.Ahead: the functions dispatch reads the record back
// with). The workers do this in parallel, and dispatch then need not read the record back
// (stages.DispatchFeed). uniq is the UNIQ_KEY's value in the properties being built, host the
// store host the record carries, keys the key header's values, tags the TAGS value ("" for
// none).
//
// Several key values are joined into one KEYS value, which is not at hand as one string here:
// such records are read back, as are those derive.Ahead does not know.
func recordIndex(rt *route.Route, uniq []byte, host netip.Addr, keys []string, tags string) stages.RecordIndex {
	if len(keys) > 1 {
		return stages.RecordIndex{}
	}
	// The UNIQ_KEY is hashed where it lies: Ahead keeps none of its props.
	p := derive.Props{Topic: rt.Topic, Tags: tags, UniqKey: unsafe.String(unsafe.SliceData(uniq), len(uniq))}
	p.UniqGenerated = commitlog.IsGeneratedUniqKey(p.UniqKey, host)
	if len(keys) == 1 {
		p.Keys = keys[0]
	}
	return stages.RecordIndex(derive.Ahead(p, rt.IndexPrefix))
}
