package derive

import (
	"unsafe"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// Props are what a record's derived entries are worked out from: its topic and its TAGS, KEYS,
// UNIQ_KEY and DELAY properties as the record holds them ("" when absent: an empty value derives
// the same as none).
type Props struct {
	Topic   string
	Tags    string
	Keys    string // keys separated by single spaces (commitlog.KeySeparator); empty tokens skipped
	UniqKey string
	// UniqGenerated says UniqKey is one the engine generated for a message that came without an
	// id (commitlog.IsGeneratedUniqKey): no publisher knows it, so the IndexFile does not hold it.
	UniqGenerated bool
	Delay         string // a delay level, a Java int
}

// PropsOf finds the props of the record v in one pass over its properties (the last entry of a
// name wins, as with Get). The strings alias the record: they are valid while its bytes are, and
// nothing here keeps them.
func PropsOf(v commitlog.View) Props {
	d := v.Properties().DispatchProps()
	p := Props{Topic: alias(v.Topic()), Tags: alias(d.Tags), Keys: alias(d.Keys), UniqKey: alias(d.UniqKey),
		Delay: alias(d.Delay)}
	p.UniqGenerated = p.UniqKey != "" && commitlog.IsGeneratedUniqKey(p.UniqKey, v.StoreHost().Addr())
	return p
}

// alias is a string over b without a copy; b must not change while it is used.
func alias(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
