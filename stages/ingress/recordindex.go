package ingress

import (
	"strings"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// recordIndex works out, while the properties are built, what dispatch needs of the record:
// the ConsumeQueue tag code and the IndexFile hashes of "topic#UNIQ_KEY" and "topic#key", in the
// order dispatch's BuildIndex puts them. The workers do this in parallel, and dispatch then
// need not read the record back (stages.DispatchFeed).
//
// It says Known only where that is sure to equal what dispatch would read from the record: a
// topic without delay levels (the schedule topic's tag code is a delivery time), and at most one
// key (KEYS is split at spaces, and a key header may have several values). Other records are
// read back, as before.
func recordIndex(rt *route.Route, uniq []byte, keys []string, tags string) stages.RecordIndex {
	if rt.Topic == commitlog.ScheduleTopic || len(keys) > 1 || (len(keys) == 1 && strings.IndexByte(keys[0], ' ') >= 0) {
		return stages.RecordIndex{}
	}
	x := stages.RecordIndex{Known: true}
	if tags != "" {
		x.TagsCode = javahash.TagsCode(tags)
	}
	if len(uniq) > 0 {
		x.Hashes[x.NHashes] = indexfile.KeyHashBytes(rt.IndexPrefix, uniq)
		x.NHashes++
	}
	if len(keys) == 1 && keys[0] != "" {
		x.Hashes[x.NHashes] = javahash.IndexHash(javahash.Continue(rt.IndexPrefix, keys[0]))
		x.NHashes++
	}
	return x
}
