package commitlog

import "github.com/rocketstore/engine/internal/store/javahash"

// DispatchProps are the properties dispatch needs from every record, found in one pass over the
// properties instead of one lookup each: the dispatcher reads every record, and three scans of
// its properties cost it about a third of its time.
type DispatchProps struct {
	Tags, Keys, UniqKey, Delay []byte
}

// DispatchProps finds TAGS, KEYS, UNIQ_KEY and DELAY (the last entry wins, as with Get).
func (p Properties) DispatchProps() DispatchProps {
	var d DispatchProps
	it := p.Iter()
	for {
		n, v, ok := it.Next()
		if !ok {
			return d
		}
		switch string(n) {
		case PropTags:
			d.Tags = v
		case PropKeys:
			d.Keys = v
		case PropUniqKey:
			d.UniqKey = v
		case PropDelay:
			d.Delay = v
		}
	}
}

// TagsCodeOf is TagsCode with the properties already found.
func (v View) TagsCodeOf(d DispatchProps, levels DelayLevels) int64 {
	var code int64
	if len(d.Tags) > 0 {
		code = int64(javahash.Bytes(d.Tags))
	}
	if d.Delay == nil || string(v.Topic()) != ScheduleTopic {
		return code
	}
	level, ok := parseJavaInt(d.Delay)
	if !ok {
		return code
	}
	if levels == nil {
		levels = defaultDelayLevels
	}
	level = min(level, int64(len(levels)))
	if level <= 0 {
		return code
	}
	return v.StoreTimestamp() + levels[level-1]
}
